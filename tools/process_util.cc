#include "tools/process_util.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

extern char** environ;

namespace clf::tools {
namespace {

std::vector<std::string> MergedEnv(const std::vector<std::string>& extra) {
  std::vector<std::string> out;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string kv(*e);
    std::string key = kv.substr(0, kv.find('='));
    bool replaced = false;
    for (const std::string& x : extra) {
      if (x.substr(0, x.find('=')) == key) replaced = true;
    }
    if (!replaced) out.push_back(std::move(kv));
  }
  out.insert(out.end(), extra.begin(), extra.end());
  return out;
}

std::vector<char*> CStrings(std::vector<std::string>& v) {
  std::vector<char*> out;
  out.reserve(v.size() + 1);
  for (std::string& s : v) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// posix_spawn with our attributes; `actions` already holds the descriptor setup.
Result<pid_t> SpawnWith(const std::vector<std::string>& argv, posix_spawn_file_actions_t* actions,
                        bool new_session, const std::vector<std::string>& env) {
  if (argv.empty()) return Invalid("spawn: empty argv");
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  short flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
  if (new_session) flags |= POSIX_SPAWN_SETSID;
  posix_spawnattr_setflags(&attr, flags);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  std::vector<std::string> args = argv;
  std::vector<std::string> envs = MergedEnv(env);
  std::vector<char*> cargs = CStrings(args);
  std::vector<char*> cenv = CStrings(envs);
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, cargs[0], actions, &attr, cargs.data(), cenv.data());
  posix_spawnattr_destroy(&attr);
  if (rc != 0) return FromErrno(rc, "spawn " + argv[0]);
  return pid;
}

std::string Dirname(const std::string& p) { return std::filesystem::path(p).parent_path().string(); }

bool IsExecutableFile(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
}

std::string UnescapeMountinfo(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size()) {
      int v = 0;
      bool ok = true;
      for (size_t j = 1; j <= 3; ++j) {
        char c = s[i + j];
        if (c < '0' || c > '7') ok = false;
        v = v * 8 + (c - '0');
      }
      if (ok) {
        out.push_back(static_cast<char>(v));
        i += 3;
        continue;
      }
    }
    out.push_back(s[i]);
  }
  return out;
}

// The canonical form of a path whose last component may be a dead mount.
std::string CanonicalParentJoin(const std::string& path) {
  std::filesystem::path p = std::filesystem::absolute(path).lexically_normal();
  if (p.has_filename() == false) p = p.parent_path();
  std::error_code ec;
  std::filesystem::path parent = std::filesystem::canonical(p.parent_path(), ec);
  if (ec) return p.string();
  return (parent / p.filename()).string();
}

}  // namespace

Result<pid_t> Spawn(const std::vector<std::string>& argv, const SpawnOptions& opts) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (opts.stdin_null) posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  constexpr int kLogFlags = O_WRONLY | O_CREAT | O_APPEND;
  if (!opts.stdout_path.empty()) {
    posix_spawn_file_actions_addopen(&actions, 1, opts.stdout_path.c_str(), kLogFlags, 0644);
    if (opts.stderr_path.empty()) posix_spawn_file_actions_adddup2(&actions, 1, 2);
  }
  if (!opts.stderr_path.empty()) {
    posix_spawn_file_actions_addopen(&actions, 2, opts.stderr_path.c_str(), kLogFlags, 0644);
  }
  Result<pid_t> pid = SpawnWith(argv, &actions, opts.new_session, opts.env);
  posix_spawn_file_actions_destroy(&actions);
  return pid;
}

Result<RunResult> Run(const std::vector<std::string>& argv, int timeout_ms,
                      const std::vector<std::string>& env) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return FromErrno(errno, "pipe");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 2);
  Result<pid_t> pid = SpawnWith(argv, &actions, false, env);
  posix_spawn_file_actions_destroy(&actions);
  ::close(fds[1]);
  if (!pid.ok()) {
    ::close(fds[0]);
    return pid.status();
  }
  RunResult r;
  const int64_t deadline = timeout_ms > 0 ? NowMs() + timeout_ms : 0;
  int status = 0;
  bool reaped = false;
  bool eof = false;
  char buf[65536];
  // Read until EOF, or until the child is gone (a daemon it left may hold the pipe).
  while (!eof) {
    struct pollfd pfd = {fds[0], POLLIN, 0};
    int pr = ::poll(&pfd, 1, 50);
    if (pr > 0) {
      ssize_t n = ::read(fds[0], buf, sizeof buf);
      if (n > 0) {
        r.output.append(buf, static_cast<size_t>(n));
        continue;
      }
      if (n == 0 || (errno != EINTR && errno != EAGAIN)) eof = true;
      continue;
    }
    if (!reaped && ::waitpid(*pid, &status, WNOHANG) == *pid) reaped = true;
    if (reaped) {
      // Drain whatever is buffered without blocking, then stop.
      for (;;) {
        struct pollfd p2 = {fds[0], POLLIN, 0};
        if (::poll(&p2, 1, 0) <= 0) break;
        ssize_t n = ::read(fds[0], buf, sizeof buf);
        if (n <= 0) break;
        r.output.append(buf, static_cast<size_t>(n));
      }
      break;
    }
    if (deadline != 0 && NowMs() > deadline) {
      ::kill(*pid, SIGKILL);
      r.timed_out = true;
      break;
    }
  }
  ::close(fds[0]);
  if (!reaped) {
    while (::waitpid(*pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  if (WIFEXITED(status)) {
    r.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    r.exit_code = 128 + WTERMSIG(status);
  }
  return r;
}

bool ProcessAlive(pid_t pid) {
  if (pid <= 0) return false;
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  if (!in) return false;
  std::string line;
  std::getline(in, line);
  size_t close = line.rfind(')');
  if (close == std::string::npos || close + 2 >= line.size()) return false;
  char state = line[close + 2];
  return state != 'Z' && state != 'X';
}

bool WaitChild(pid_t pid, int timeout_ms, int* status) {
  const int64_t deadline = NowMs() + (timeout_ms < 0 ? 0 : timeout_ms);
  for (;;) {
    int st = 0;
    pid_t r = ::waitpid(pid, &st, WNOHANG);
    if (r == pid) {
      if (status != nullptr) *status = st;
      return true;
    }
    if (r < 0 && errno == ECHILD && !ProcessAlive(pid)) return true;
    if (timeout_ms >= 0 && NowMs() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

bool StopProcess(pid_t pid, int grace_ms) {
  if (pid <= 0) return false;
  if (!ProcessAlive(pid)) {
    WaitChild(pid, 0);  // reap a zombie child, if it is ours
    return false;
  }
  ::kill(pid, SIGTERM);
  if (WaitChild(pid, grace_ms)) return true;
  ::kill(pid, SIGKILL);
  WaitChild(pid, 10000);
  return true;
}

std::string ProcessName(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/comm");
  std::string name;
  if (in) std::getline(in, name);
  return name;
}

pid_t ReadPidFile(const std::string& path) {
  std::ifstream in(path);
  long v = 0;
  if (!(in >> v) || v <= 0) return 0;
  return static_cast<pid_t>(v);
}

std::string FindBinary(const std::string& name, const std::vector<std::string>& build_subdirs) {
  std::error_code ec;
  std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    std::string dir = exe.parent_path().string();
    if (IsExecutableFile(dir + "/" + name)) return dir + "/" + name;
    std::string up = Dirname(dir);
    for (const std::string& sub : build_subdirs) {
      std::string p = up + "/" + sub + "/" + name;
      if (IsExecutableFile(p)) return p;
    }
  }
  const char* path = std::getenv("PATH");
  std::stringstream ss(path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin");
  std::string d;
  while (std::getline(ss, d, ':')) {
    if (d.empty()) continue;
    if (IsExecutableFile(d + "/" + name)) return d + "/" + name;
  }
  return "";
}

Result<std::vector<uint16_t>> PickFreePorts(int n) {
  std::vector<int> socks;
  std::vector<uint16_t> ports;
  Status st;
  for (int i = 0; i < n; ++i) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      st = FromErrno(errno, "socket");
      break;
    }
    socks.push_back(fd);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    socklen_t len = sizeof a;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      st = FromErrno(errno, "bind 127.0.0.1:0");
      break;
    }
    ports.push_back(ntohs(a.sin_port));
  }
  for (int fd : socks) ::close(fd);
  if (!st.ok()) return st;
  return ports;
}

bool IsMountRoot(const std::string& path) {
  struct stat a, b;
  if (::stat(path.c_str(), &a) != 0) return false;
  std::string parent = (std::filesystem::path(path) / "..").string();
  if (::stat(parent.c_str(), &b) != 0) return false;
  return a.st_dev != b.st_dev;
}

std::vector<MountEntry> ListMounts(const std::string& source_prefix) {
  std::vector<MountEntry> out;
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::vector<std::string> f;
    std::string w;
    while (ls >> w) f.push_back(w);
    size_t dash = 0;
    for (size_t i = 6; i < f.size(); ++i) {
      if (f[i] == "-") {
        dash = i;
        break;
      }
    }
    if (dash == 0 || dash + 2 >= f.size() || f.size() < 5) continue;
    MountEntry e;
    e.mount_point = UnescapeMountinfo(f[4]);
    e.fstype = f[dash + 1];
    e.source = UnescapeMountinfo(f[dash + 2]);
    if (e.source.rfind(source_prefix, 0) != 0) continue;
    out.push_back(std::move(e));
  }
  return out;
}

Status UnmountFuse(const std::string& path) {
  const std::string canon = CanonicalParentJoin(path);
  auto mounted = [&] {
    for (const MountEntry& e : ListMounts()) {
      if (e.mount_point == canon) return true;
    }
    return false;
  };
  if (!mounted()) return Status::Ok();
  Result<RunResult> r = Run({"fusermount3", "-u", "-q", canon}, 30000);
  if (r.ok() && r->exit_code == 0 && !mounted()) return Status::Ok();
  Result<RunResult> l = Run({"umount", "-l", canon}, 30000);
  if (!mounted()) return Status::Ok();
  std::string why = r.ok() ? r->output : r.status().ToString();
  if (l.ok()) why += "; umount -l: " + l->output;
  return IoError("could not unmount " + canon + ": " + why);
}

Result<std::string> RandomHex(size_t bytes) {
  std::ifstream in("/dev/urandom", std::ios::binary);
  if (!in) return FromErrno(errno, "open /dev/urandom");
  std::string raw(bytes, '\0');
  in.read(raw.data(), static_cast<std::streamsize>(bytes));
  if (!in) return IoError("short read from /dev/urandom");
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : raw) {
    out.push_back(kHex[c >> 4]);
    out.push_back(kHex[c & 15]);
  }
  return out;
}

Status WriteFileWithMode(const std::string& path, const std::string& content, uint32_t mode) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return FromErrno(errno, "create " + path);
  if (::fchmod(fd, mode) != 0) {
    int e = errno;
    ::close(fd);
    return FromErrno(e, "chmod " + path);
  }
  size_t done = 0;
  while (done < content.size()) {
    ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      int e = errno;
      ::close(fd);
      return FromErrno(e, "write " + path);
    }
    done += static_cast<size_t>(n);
  }
  if (::close(fd) != 0) return FromErrno(errno, "close " + path);
  return Status::Ok();
}

Result<std::string> ReadFileToString(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return FromErrno(errno, "open " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string HumanBytes(uint64_t bytes) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 6) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  if (u == 0) {
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  } else {
    std::snprintf(buf, sizeof buf, "%.1f %s", v, kUnits[u]);
  }
  return buf;
}

}  // namespace clf::tools
