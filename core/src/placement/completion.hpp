// When an array's data has arrived, and whether it did.
//
// Two kinds: one finished by a transfer job (finish_*), and one tracking a
// plugin event directly (an asynchronous copy issued on the caller's thread),
// which holds whatever the copy reads or writes until the event completed.
#pragma once

#include "registry/backend.hpp"

#include <backplane/error.hpp>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace backplane {

class Completion {
 public:
  // `description` names the operation, size and devices; it prefixes errors.
  explicit Completion(std::string description) : description_(std::move(description)) {}
  Completion(std::string description, std::shared_ptr<Backend> backend, int ordinal, BP_Event* event,
             std::vector<std::shared_ptr<const void>> keep_alive);
  // A pending event is waited for (event_destroy waits), so buffers return to
  // their caches only once nothing writes them any more.
  ~Completion();
  Completion(const Completion&) = delete;
  Completion& operator=(const Completion&) = delete;

  void finish_ok();
  // `message` is what went wrong; the description is prepended.
  void finish_error(ErrorCode code, const std::string& message);

  // Blocks until done; throws Error(code, "<description> failed: <why>").
  void wait();
  // Done (successfully or not); never throws.
  bool ready() noexcept;
  // Done and successful; never throws.
  bool succeeded() noexcept;

  const std::string& description() const { return description_; }

 private:
  // With event_mutex_ held: collects the event's result and releases it.
  void settle_event_locked() noexcept;

  const std::string description_;

  std::mutex event_mutex_;  // serialises waits on the plugin event
  std::shared_ptr<Backend> backend_;
  int ordinal_ = 0;
  BP_Event* event_ = nullptr;
  std::vector<std::shared_ptr<const void>> keep_alive_;

  std::mutex mutex_;  // guards the result
  std::condition_variable done_signal_;
  bool done_ = false;
  ErrorCode code_ = ErrorCode::kOk;
  std::string message_;
};

}  // namespace backplane
