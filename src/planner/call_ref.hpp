#pragma once
// CallRef: a non-owning reference to a callable, for sinks called once per edge.
#include <type_traits>
#include <utility>

namespace dtensor {

// A callable's reference (it must outlive the call it is passed to): no copy, no allocation,
// for sinks called once per edge.
template <typename Signature>
class CallRef;
template <typename R, typename... Args>
class CallRef<R(Args...)> {
 public:
  template <typename F, typename = std::enable_if_t<!std::is_same_v<std::decay_t<F>, CallRef>>>
  CallRef(F&& f) noexcept  // NOLINT: converts from any callable, like std::function (a CallRef is copied)
      : obj_(const_cast<void*>(static_cast<const void*>(&f))),
        call_([](void* o, Args... a) -> R { return (*static_cast<std::remove_reference_t<F>*>(o))(std::forward<Args>(a)...); }) {}
  R operator()(Args... a) const { return call_(obj_, std::forward<Args>(a)...); }

 private:
  void* obj_;
  R (*call_)(void*, Args...);
};

}  // namespace dtensor
