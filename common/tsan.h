// ThreadSanitizer annotations for hand-offs whose synchronization TSan cannot
// see (docs/testing.md, "### TSan").
//
// Debian's gRPC is not built with TSan. When we start an async gRPC call, the
// state we built on the caller's thread (request, reply message, context, the
// result slots the completion fills) is handed to gRPC, and the completion
// callback later runs on a gRPC thread. The ordering between the two is real:
// grpc_call_start_batch and the completion queue, inside libgrpc, guarantee
// that the callback runs after the start returned its batch to gRPC. TSan does
// not see it, so Release(tag) just before the start and Acquire(tag) at the
// top of the completion tell it where that happens-before edge is. Nothing
// else is ordered by these annotations: a race between the completion and any
// other thread than the one that started the call is still reported.
//
// Without TSan every function here is a no-op (Handoff returns its callable
// unchanged).
#pragma once

#include <utility>

#if defined(__SANITIZE_THREAD__)
#define CLF_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CLF_TSAN 1
#endif
#endif

#ifdef CLF_TSAN
#include <sanitizer/tsan_interface.h>
#endif

namespace clf::tsan {

// True in a TSan build: code runs several times slower there, which tests
// with tight deadlines take into account.
#ifdef CLF_TSAN
inline constexpr bool kActive = true;
#else
inline constexpr bool kActive = false;
#endif

// Everything this thread did so far happens before a later Acquire(tag).
inline void Release([[maybe_unused]] const void* tag) {
#ifdef CLF_TSAN
  __tsan_release(const_cast<void*>(tag));
#endif
}

// Everything done before an earlier Release(tag) happens before what this
// thread does next.
inline void Acquire([[maybe_unused]] const void* tag) {
#ifdef CLF_TSAN
  __tsan_acquire(const_cast<void*>(tag));
#endif
}

// For the completion callback of an async gRPC call, built as the last
// argument of the start (`stub->async()->M(ctx, req, rep, Handoff(call, cb))`):
// Release(tag) now, and a callable that Acquire(tag)s before running `fn`.
// `tag` is any address that stays allocated until the completion has run
// (the call's state, which the callback keeps alive).
template <typename Fn>
auto Handoff([[maybe_unused]] const void* tag, Fn fn) {
#ifdef CLF_TSAN
  Release(tag);
  return [tag, fn = std::move(fn)](auto&&... args) mutable -> decltype(auto) {
    Acquire(tag);
    return fn(std::forward<decltype(args)>(args)...);
  };
#else
  return fn;
#endif
}

}  // namespace clf::tsan
