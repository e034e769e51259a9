// LD_PRELOAD shim for tests: the process's wall clock (CLOCK_REALTIME,
// gettimeofday, time) runs CLF_TEST_CLOCK_SKEW_MS milliseconds (signed) off
// the host's, so one clfd can be started with a skewed clock next to the
// others. Monotonic clocks are left alone, as a skewed host's would be.
#include <dlfcn.h>
#include <sys/time.h>
#include <time.h>

#include <cstdlib>

namespace {

using clock_gettime_fn = int (*)(clockid_t, struct timespec*);

long long skew_ms() {
  static long long cached;
  static int ready;
  if (!ready) {
    const char* v = getenv("CLF_TEST_CLOCK_SKEW_MS");
    cached = v != nullptr ? std::atoll(v) : 0;
    ready = 1;
  }
  return cached;
}

clock_gettime_fn real_clock_gettime() {
  static clock_gettime_fn fn;
  if (fn == nullptr) fn = reinterpret_cast<clock_gettime_fn>(dlsym(RTLD_NEXT, "clock_gettime"));
  return fn;
}

void add_skew(struct timespec* ts) {
  long long ns = (long long)ts->tv_nsec + (skew_ms() % 1000) * 1000000LL;
  long long sec = (long long)ts->tv_sec + skew_ms() / 1000;
  while (ns < 0) {
    ns += 1000000000LL;
    --sec;
  }
  while (ns >= 1000000000LL) {
    ns -= 1000000000LL;
    ++sec;
  }
  ts->tv_sec = static_cast<time_t>(sec);
  ts->tv_nsec = static_cast<long>(ns);
}

}  // namespace

extern "C" {

int clock_gettime(clockid_t id, struct timespec* ts) noexcept {
  int r = real_clock_gettime()(id, ts);
  if (r == 0 && (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE || id == CLOCK_TAI)) {
    add_skew(ts);
  }
  return r;
}

int gettimeofday(struct timeval* tv, void* tz) noexcept {
  (void)tz;
  struct timespec ts;
  int r = clock_gettime(CLOCK_REALTIME, &ts);
  if (r == 0) {
    tv->tv_sec = ts.tv_sec;
    tv->tv_usec = static_cast<suseconds_t>(ts.tv_nsec / 1000);
  }
  return r;
}

time_t time(time_t* out) noexcept {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  if (out != nullptr) *out = ts.tv_sec;
  return ts.tv_sec;
}

}  // extern "C"
