// The one way tandem's C++ files keep C++ exceptions from crossing into Rust.
//
// `guarded(err, body)` runs `body`; it returns 0 when body returns, and 1 when it throws, with a
// malloc'ed, NUL-terminated copy of the exception's message in *err (the caller frees it with the
// file's own free function). `caught(message, body)` is the same guard for code that must keep
// the error rather than return it (autograd hooks, the waits of a reducer that go on after one
// failure).
#pragma once

#include <c10/util/Exception.h>

#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <utility>

namespace tandem_ffi {

inline char* dup_message(const std::string& msg) {
  char* out = static_cast<char*>(std::malloc(msg.size() + 1));
  if (out != nullptr) {
    std::memcpy(out, msg.data(), msg.size());
    out[msg.size()] = '\0';
  }
  return out;
}

// c10 errors carry a backtrace after the first line in some builds; the first part is what a
// user can act on, so keep the message without the "Exception raised from ..." tail.
inline std::string clean_what(const char* what) {
  std::string s(what == nullptr ? "unknown error" : what);
  auto cut = s.find("\nException raised from");
  if (cut != std::string::npos) s.resize(cut);
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// Runs `body` and keeps any exception from leaving: returns false when body returned, true when
// it threw, with the exception's message in `message`. The one try/catch of tandem's C++; the
// entry points use it through `guarded`, the reducer's autograd hooks and waits directly.
// The message of the exception being handled; call only inside a catch block.
inline std::string current_message() {
  try {
    throw;
  } catch (const c10::Error& e) {
    return clean_what(e.what_without_backtrace());
  } catch (const std::exception& e) {
    return clean_what(e.what());
  } catch (...) {
    return "unknown C++ exception";
  }
}

template <typename F>
bool caught(std::string& message, F&& body) noexcept {
  try {
    body();
    return false;
  } catch (...) {
    try {
      message = current_message();
    } catch (...) {
      // Copying the message ran out of memory. This fits std::string's inline buffer, so
      // assigning it allocates nothing and cannot throw.
      message = "out of memory";
    }
    return true;
  }
}

// An `extern "C"` entry point's body: 0 when it returned; 1 when it threw, with the message in
// *err (null when even the copy could not be allocated).
template <typename F>
int guarded(char** err, F&& body) noexcept {
  std::string message;
  bool failed = caught(message, std::forward<F>(body));
  if (!failed) return 0;
  // A null copy (no memory left) still leaves the error code.
  if (err) *err = dup_message(message);
  return 1;
}

}  // namespace tandem_ffi
