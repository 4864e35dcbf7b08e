// Test helper for cross_check.py: writes a safetensors file with
// backplane::safetensors::save from a JSON description, so that the reference
// implementation can read what we write.
//
//   safetensors_write_helper SPEC.json OUT.safetensors
//
// SPEC: {"metadata": {"k": "v"} | null,
//        "tensors": [{"name": "...", "dtype": "F32", "shape": [2], "data_hex": "0000803f..."}]}
// Exit status: 0 written, 1 refused (message on stderr), 2 usage.
#include <backplane/safetensors.hpp>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

namespace st = backplane::safetensors;

namespace {

std::vector<std::byte> from_hex(const std::string& hex) {
  std::vector<std::byte> bytes(hex.size() / 2);
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    bytes[i] = static_cast<std::byte>(std::stoul(hex.substr(2 * i, 2), nullptr, 16));
  }
  return bytes;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: safetensors_write_helper SPEC.json OUT.safetensors\n");
    return 2;
  }
  try {
    std::ifstream in(argv[1]);
    auto spec = nlohmann::json::parse(in);
    std::optional<st::Metadata> metadata;
    if (spec.contains("metadata") && !spec["metadata"].is_null()) metadata = spec["metadata"].get<st::Metadata>();
    std::vector<std::vector<std::byte>> buffers;
    std::vector<st::HostTensor> tensors;
    for (const auto& tensor : spec.at("tensors")) buffers.push_back(from_hex(tensor.at("data_hex")));
    std::size_t i = 0;
    for (const auto& tensor : spec.at("tensors")) {
      tensors.push_back({{tensor.at("name"), tensor.at("dtype"), tensor.at("shape").get<std::vector<std::uint64_t>>()},
                         buffers[i++]});
    }
    st::save(argv[2], tensors, metadata);
    return 0;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "safetensors_write_helper: %s\n", error.what());
    return 1;
  }
}
