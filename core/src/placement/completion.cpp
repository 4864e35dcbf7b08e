#include "placement/completion.hpp"

#include <fmt/format.h>

namespace backplane {

Completion::Completion(std::string description, std::shared_ptr<Backend> backend, int ordinal, BP_Event* event,
                       std::vector<std::shared_ptr<const void>> keep_alive)
    : description_(std::move(description)),
      backend_(std::move(backend)),
      ordinal_(ordinal),
      event_(event),
      keep_alive_(std::move(keep_alive)) {}

Completion::~Completion() {
  const std::lock_guard lock(event_mutex_);
  settle_event_locked();
}

void Completion::finish_ok() {
  {
    const std::lock_guard lock(mutex_);
    done_ = true;
  }
  done_signal_.notify_all();
}

void Completion::finish_error(ErrorCode code, const std::string& message) {
  {
    const std::lock_guard lock(mutex_);
    done_ = true;
    code_ = code == ErrorCode::kOk ? ErrorCode::kInternal : code;
    message_ = message;
  }
  done_signal_.notify_all();
}

void Completion::settle_event_locked() noexcept {
  if (event_ == nullptr) return;
  std::optional<PluginFailure> failure;
  try {
    failure = backend_->wait_event(event_);
  } catch (...) {  // only allocation can throw here
    failure = PluginFailure{ErrorCode::kOutOfMemory, "out of memory while reading the event's error"};
  }
  backend_->destroy_event(event_);
  event_ = nullptr;
  // Release the staging and source buffers before anyone sees "done", so
  // memory statistics read after a wait are already settled.
  keep_alive_.clear();
  if (failure) {
    try {
      finish_error(failure->code, fmt::format("{}:{}: {}", backend_->name(), ordinal_, failure->message));
    } catch (...) {
      finish_error(failure->code, failure->message);
    }
  } else {
    finish_ok();
  }
}

void Completion::wait() {
  {
    const std::lock_guard lock(event_mutex_);
    settle_event_locked();
  }
  std::unique_lock lock(mutex_);
  done_signal_.wait(lock, [this] { return done_; });
  if (code_ != ErrorCode::kOk) throw Error(code_, fmt::format("{} failed: {}", description_, message_));
}

bool Completion::ready() noexcept {
  {
    std::unique_lock lock(event_mutex_, std::try_to_lock);
    // Busy means another thread is settling the event right now: not done yet.
    if (lock.owns_lock() && event_ != nullptr && backend_->query_event(event_)) settle_event_locked();
  }
  const std::lock_guard lock(mutex_);
  return done_;
}

bool Completion::succeeded() noexcept {
  if (!ready()) return false;
  const std::lock_guard lock(mutex_);
  return code_ == ErrorCode::kOk;
}

}  // namespace backplane
