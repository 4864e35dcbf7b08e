// A small backend the contract test compiles in variants: as written it is
// complete and must compile; each VARIANT_* breaks one hook the way a plugin
// author might, and the compiler's output must name that hook.
#include <backplane/plugin_sdk.hpp>

#include <cstdint>
#include <memory>

namespace sdk = backplane::plugin_sdk;

class VariantBackend {
 public:
  static constexpr sdk::Identity kIdentity{.name = "variant", .version = "test"};
  struct Buffer : sdk::BufferBase {};
  struct Event {};

  static std::unique_ptr<VariantBackend> create(const sdk::Options&) { return std::make_unique<VariantBackend>(); }
  sdk::Probe probe() { return {true, "one device", {}}; }
  std::int32_t device_count() const { return 1; }
  sdk::DeviceDescription describe(std::int32_t) { return {"Variant", BP_DEVICE_KIND_CPU, {}}; }
  sdk::MemoryFigures memory(std::int32_t) { return {0, 0}; }
#if defined(VARIANT_ALLOCATE_SIZE_32_BITS)
  std::unique_ptr<Buffer> allocate(std::int32_t, BP_MemoryKind, std::uint32_t) { return nullptr; }
#else
  std::unique_ptr<Buffer> allocate(std::int32_t, BP_MemoryKind, std::uint64_t) { return nullptr; }
#endif
  std::unique_ptr<Event> copy_to_device(Buffer&, std::uint64_t, const void*, std::uint64_t, sdk::Mode) {
    return nullptr;
  }
  std::unique_ptr<Event> copy_to_host(Buffer&, std::uint64_t, void*, std::uint64_t, sdk::Mode) { return nullptr; }
  std::unique_ptr<Event> copy_device_to_device(Buffer&, std::uint64_t, Buffer&, std::uint64_t, std::uint64_t,
                                               sdk::Mode) {
    return nullptr;
  }
  void wait(Event&) {}
#if !defined(VARIANT_NO_QUERY)
  bool query(Event&) noexcept { return true; }
#endif
#if defined(VARIANT_RELEASE_BY_POINTER)
  void release(Buffer*) {}
#endif
#if defined(VARIANT_WRAP_WITHOUT_CAPABILITY)
  std::unique_ptr<Buffer> wrap(std::int32_t, void*, std::uint64_t) { return nullptr; }
#endif
};

#if defined(VARIANT_NO_QUERY) || defined(VARIANT_ALLOCATE_SIZE_32_BITS)
constexpr bool kRequiredHooksMatch = false;
#else
constexpr bool kRequiredHooksMatch = true;
#endif
// What a plugin may assert at its own line; the table checks it too.
static_assert(sdk::Backend<VariantBackend> == kRequiredHooksMatch);

BACKPLANE_PLUGIN_SDK_ENTRY(VariantBackend)
