// Logging: one spdlog logger per process, behind CLF_LOG_* macros with file:line.
// error = a failure a user sees (logged once); warn = degraded but serving;
// info = lifecycle; debug = one line per op. Never log file data.
#pragma once

#include <spdlog/spdlog.h>

#include <string>

namespace clf::log {
// Sets up the process logger: to stderr, or to `path` if not empty. `level` is
// one of trace, debug, info, warn, error. Thread safe after it returns.
void Init(const std::string& process_name, const std::string& level, const std::string& path = "");
}  // namespace clf::log

#define CLF_LOG_AT_(lvl, ...) \
  ::spdlog::default_logger_raw()->log(::spdlog::source_loc{__FILE__, __LINE__, __func__}, lvl, __VA_ARGS__)
#define CLF_LOG_DEBUG(...) CLF_LOG_AT_(::spdlog::level::debug, __VA_ARGS__)
#define CLF_LOG_INFO(...) CLF_LOG_AT_(::spdlog::level::info, __VA_ARGS__)
#define CLF_LOG_WARN(...) CLF_LOG_AT_(::spdlog::level::warn, __VA_ARGS__)
#define CLF_LOG_ERROR(...) CLF_LOG_AT_(::spdlog::level::err, __VA_ARGS__)
