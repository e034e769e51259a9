#include "common/log.h"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>

namespace clf::log {

void Init(const std::string& process_name, const std::string& level, const std::string& path) {
  std::shared_ptr<spdlog::logger> logger;
  if (path.empty()) {
    logger = spdlog::stderr_logger_mt(process_name);
  } else {
    logger = spdlog::basic_logger_mt(process_name, path);
  }
  logger->set_pattern("%Y-%m-%d %H:%M:%S.%e %L %n[%P] %s:%# %v");
  logger->set_level(spdlog::level::from_str(level));
  logger->flush_on(spdlog::level::warn);
  spdlog::set_default_logger(logger);
  spdlog::flush_every(std::chrono::seconds(1));
}

}  // namespace clf::log
