// A runtime's placement state: the transfer threads, and the way from a
// Device to its object in the registry.
#pragma once

#include "placement/completion.hpp"
#include "placement/executor.hpp"
#include "registry/device.hpp"
#include "registry/registry.hpp"

#include <backplane/backplane.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace backplane::detail {

class Placement : public std::enable_shared_from_this<Placement> {
 public:
  // Few threads: they mostly wait on device events, and each transfer's own
  // pipeline already overlaps host copies with device copies.
  static constexpr unsigned kTransferThreads = 4;

  explicit Placement(std::shared_ptr<Registry> registry)
      : registry_(std::move(registry)), executor_(kTransferThreads) {}

  // The object of `device`; throws what Runtime::resolve would for an
  // unknown or unavailable backend or an out-of-range ordinal.
  std::shared_ptr<LiveDevice> device(const Device& device) { return registry_->device(device); }

  // Runs `work` on the transfer threads. The completion finishes when `work`
  // returns, or with the Error it throws (other exceptions become kInternal).
  // `work` is destroyed before the completion finishes, so what it holds is
  // released by then. `transfer`, when given, is what the trace shows for it
  // (from submission to the end of `work`; see Completion::trace_as).
  std::shared_ptr<Completion> run(std::string description, std::function<void()> work,
                                  std::optional<TransferTrace> transfer = std::nullopt);

 private:
  const std::shared_ptr<Registry> registry_;
  TransferExecutor executor_;
};

// The runtime's placement state, made on first use.
std::shared_ptr<Placement> placement_of(Runtime& runtime);

}  // namespace backplane::detail
