// FunctionRef<R(Args...)>: a non-owning reference to a callable, for arguments that are only called
// during the call that receives them (parallel_for's body). Two pointers, no allocation and no
// destructor: unlike std::function, nothing about it is emitted as a shared weak symbol into the
// per-ISA kernel objects that pass lambdas to parallel_for (isa_symbol_check), and a call is one
// indirect jump. std::function_ref is C++26; this is the same idea for C++20.
// The referenced callable must outlive every call through the FunctionRef.
#pragma once

#include <memory>
#include <type_traits>
#include <utility>

namespace lathe {

template <class Signature>
class FunctionRef;

template <class R, class... Args>
class FunctionRef<R(Args...)> {
 public:
  // Implicit, like std::function's constructor: a lambda converts where a FunctionRef is expected.
  template <class F, class = std::enable_if_t<!std::is_same_v<std::remove_cvref_t<F>, FunctionRef> &&
                                              std::is_invocable_r_v<R, F&, Args...>>>
  FunctionRef(F&& callable) noexcept
      : object_(const_cast<void*>(static_cast<const void*>(std::addressof(callable)))),
        call_([](void* object, Args... args) -> R {
          return (*static_cast<std::remove_reference_t<F>*>(object))(std::forward<Args>(args)...);
        }) {}

  R operator()(Args... args) const { return call_(object_, std::forward<Args>(args)...); }

 private:
  void* object_;
  R (*call_)(void*, Args...);
};

}  // namespace lathe
