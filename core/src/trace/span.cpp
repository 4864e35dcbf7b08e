// trace::Span: a complete event and an NVTX range, begun and ended together.
#include "trace/trace.hpp"

namespace backplane::detail::trace {

Span::Span(std::string_view category, std::string_view name, std::uint64_t bytes, Clock::time_point begin,
           bool nested) noexcept {
  if (!enabled()) return;
  category_ = category;
  try {
    name_ = std::string(name);
  } catch (...) {  // no memory for the name: no span
    return;
  }
  if (tools_attached()) {
    if (nested) {
      nvtx_push(name_);
      pushed_ = true;
    } else {
      range_ = nvtx_start(name_, bytes);
    }
  }
  if (recording()) {
    recorded_ = true;
    begin_ = begin == Clock::time_point{} ? Clock::now() : begin;
  }
  nested_ = nested;
}

void Span::close() noexcept {
  // A nested span is a scope: its event is recorded as it closes. One that
  // may end elsewhere and was never ended describes work abandoned midway.
  if (nested_) {
    end();
  } else {
    discard();
  }
}

void Span::take(Span& other) noexcept {
  recorded_ = std::exchange(other.recorded_, false);
  pushed_ = std::exchange(other.pushed_, false);
  nested_ = other.nested_;
  range_ = std::exchange(other.range_, 0);
  category_ = other.category_;
  name_ = std::move(other.name_);
  begin_ = other.begin_;
  args_ = std::move(other.args_);
}

void Span::end_range() noexcept {
  if (std::exchange(pushed_, false)) nvtx_pop();
  if (range_ != 0) nvtx_end(std::exchange(range_, 0));
}

void Span::arg(Arg value) noexcept {
  if (!recorded_) return;
  try {
    args_.push_back(std::move(value));
  } catch (...) {  // no memory: the event goes without this argument
  }
}

void Span::rename(std::string name) noexcept {
  if (recorded_) name_ = std::move(name);
}

void Span::end(Track track, Args args, Clock::time_point end) noexcept {
  end_range();
  if (!std::exchange(recorded_, false)) return;
  try {
    if (args_.empty()) {
      args_ = std::move(args);
    } else {
      std::move(args.begin(), args.end(), std::back_inserter(args_));
    }
  } catch (...) {  // no memory: the event goes without these arguments
  }
  complete(track, category_, std::move(name_), begin_, end == Clock::time_point{} ? Clock::now() : end,
           std::move(args_));
}

void Span::discard() noexcept {
  end_range();
  recorded_ = false;
}

}  // namespace backplane::detail::trace
