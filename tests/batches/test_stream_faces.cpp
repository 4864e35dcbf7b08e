// One message per bad argument on every face: each case of
// bad_stream_arguments.json fed to the C++ BatchStream and to the C
// bp_batch_stream_create gives exactly the status and message the file
// names. tests/python/test_batch_stream_faces.py holds Python to the same
// file.
#include "support/placement_fixture.hpp"
#include "support/temp_dir.hpp"

#include <backplane/backplane.h>
#include <backplane/batch_stream.hpp>

#include <nlohmann/json.hpp>

#include <fstream>
#include <optional>
#include <string>
#include <vector>

using namespace backplane;
using namespace backplane::testing;
using Json = nlohmann::json;

namespace {

struct Outcome {
  std::string status;  // bp_status_name's words
  std::string message;
};

Json cases_file() {
  std::ifstream file(std::string(BP_TEST_SOURCE_DIR) + "/tests/batches/bad_stream_arguments.json");
  REQUIRE(file.good());
  return Json::parse(file);
}

// The defaults with the case's options over them.
Json merged(const Json& defaults, const Json& options) {
  Json merged = defaults;
  for (const auto& [key, value] : options.items()) merged[key] = value;
  return merged;
}

// A case's "documents": {"bos": token}, {"eos": token}, or one list of
// starts per source.
DocumentBoundaries documents_of(const Json& documents) {
  if (documents.is_array()) return DocumentBoundaries::given(documents.get<std::vector<std::vector<std::int64_t>>>());
  if (documents.contains("bos")) return DocumentBoundaries::bos(documents["bos"].get<std::int64_t>());
  return DocumentBoundaries::eos(documents.at("eos").get<std::int64_t>());
}

// A case's "layout": {"mesh": [[name, size], ...], "batch": [names],
// "sequence": [names], "sequence_order": "contiguous" or "head_tail",
// "ranks": [ranks]}.
Layout layout_of(const Json& layout) {
  Layout out;
  for (const Json& axis : layout.value("mesh", Json::array())) {
    out.mesh.push_back({axis[0].get<std::string>(), axis[1].get<std::int64_t>()});
  }
  out.batch = layout.value("batch", std::vector<std::string>{});
  out.sequence = layout.value("sequence", std::vector<std::string>{});
  if (layout.value("sequence_order", std::string("contiguous")) == "head_tail") {
    out.sequence_order = Layout::SequenceOrder::kHeadTail;
  }
  out.ranks = layout.value("ranks", std::vector<std::int64_t>{});
  return out;
}

BatchStreamOptions cxx_options(Runtime& runtime, const Json& options) {
  BatchStreamOptions cxx;
  cxx.batch_size = options.value("batch_size", std::int64_t{0});
  cxx.context = options.value("context", std::int64_t{0});
  for (const Json& selector : options.value("devices", Json::array())) {
    cxx.devices.push_back(runtime.resolve(selector.get<std::string>()));
  }
  if (options.contains("dtype")) cxx.dtype = dtype_from_name(options["dtype"].get<std::string>());
  cxx.seed = options.value("seed", std::uint64_t{0});
  cxx.rank = options.value("rank", std::int64_t{0});
  cxx.world_size = options.value("world_size", std::int64_t{1});
  cxx.prefetch = options.value("prefetch", std::int64_t{2});
  cxx.weights = options.value("weights", std::vector<double>{});
  cxx.threads = options.value("threads", 0U);
  cxx.release_pages = options.value("release_pages", false);
  if (options.contains("documents")) cxx.documents = documents_of(options["documents"]);
  cxx.max_documents = options.value("max_documents", std::int64_t{0});
  for (const Json& entry : options.value("schedule", Json::array())) {
    cxx.schedule.push_back({entry[0].get<std::int64_t>(), entry[1].get<std::int64_t>(), entry[2].get<std::int64_t>()});
  }
  for (const Json& entry : options.value("weight_schedule", Json::array())) {
    cxx.weight_schedule.push_back({entry[0].get<std::int64_t>(), entry[1].get<std::vector<double>>()});
  }
  if (options.contains("layout")) cxx.layout = layout_of(options["layout"]);
  return cxx;
}

// A state whose `field` is an array nested `depth` deep.
std::string nested_state(const Json& nesting) {
  const std::size_t depth = nesting["depth"].get<std::size_t>();
  return R"({"format": "backplane.batch_stream", "version": 1, ")" + nesting["field"].get<std::string>() +
         "\": " + std::string(depth, '[') + std::string(depth, ']') + "}";
}

// The state a case resumes from, as JSON; nullopt for none.
std::optional<std::string> state_of(Runtime& runtime, const Array& source, const Json& defaults, const Json& test) {
  if (test.contains("state_text")) return test["state_text"].get<std::string>();
  if (test.contains("state_nested")) return nested_state(test["state_nested"]);
  if (test.contains("saved_with")) {
    const BatchStream saved(runtime, {source}, cxx_options(runtime, merged(defaults, test["saved_with"])));
    BatchStreamState state = saved.state();
    state.step = test.value("saved_step", std::int64_t{0});
    return state.to_json();
  }
  if (test.contains("state_step")) {
    const BatchStream saved(runtime, {source}, cxx_options(runtime, merged(defaults, test["options"])));
    BatchStreamState state = saved.state();
    state.step = test["state_step"].get<std::int64_t>();
    return state.to_json();
  }
  return std::nullopt;
}

Outcome through_cxx(Runtime& runtime, const Array& source, const Json& options,
                    const std::optional<std::string>& state) {
  const Error error = error_from([&] {
    const std::optional<BatchStreamState> resume =
        state ? std::optional(BatchStreamState::from_json(*state)) : std::nullopt;
    BatchStream stream(runtime, {source}, cxx_options(runtime, options), resume ? &*resume : nullptr);
  });
  return {bp_status_name(static_cast<bp_status>(error.code())), error.what()};
}

// A C runtime as placement_options() makes a C++ one: cpu with four devices.
bp_runtime* c_runtime() {
  const TempDir directory;
  const std::filesystem::path config = directory / "cpu.toml";
  std::ofstream(config) << "[backend.cpu]\ndevices = 4\n";
  const char* const paths[] = {BP_TEST_PLUGIN_DIR, BP_TEST_FIXTURE_DIR};
  bp_runtime_options options{};
  options.struct_size = sizeof(options);
  options.plugin_paths = paths;
  options.plugin_path_count = 2;
  options.config_file = config.c_str();
  options.ignore_environment = 1;
  options.skip_default_paths = 1;
  bp_runtime* runtime = nullptr;
  REQUIRE(bp_runtime_create(&options, &runtime) == BP_OK);
  std::size_t backends = 0;
  REQUIRE(bp_backend_count(runtime, &backends) == BP_OK);  // discovery reads the file now
  return runtime;
}

// The C fields of a case's documents; `starts` keeps the arrays they point to.
struct CDocuments {
  bp_documents_kind kind = BP_DOCUMENTS_NONE;
  std::int64_t token = 0;
  std::vector<std::vector<std::int64_t>> starts;
  std::vector<const std::int64_t*> pointers;
  std::vector<std::size_t> counts;
};

CDocuments c_documents(const Json& options) {
  CDocuments c;
  if (!options.contains("documents")) return c;
  const DocumentBoundaries documents = documents_of(options["documents"]);
  c.kind = documents.kind == DocumentBoundaries::Kind::kBos   ? BP_DOCUMENTS_BOS
           : documents.kind == DocumentBoundaries::Kind::kEos ? BP_DOCUMENTS_EOS
                                                              : BP_DOCUMENTS_STARTS;
  c.token = documents.token;
  c.starts = documents.starts;
  for (const std::vector<std::int64_t>& starts : c.starts) {
    c.pointers.push_back(starts.data());
    c.counts.push_back(starts.size());
  }
  return c;
}

Outcome through_c(const Json& options, std::uint64_t tokens, const std::optional<std::string>& state) {
  bp_runtime* runtime = c_runtime();
  std::vector<std::uint16_t> values(tokens);
  for (std::size_t index = 0; index < values.size(); ++index) values[index] = static_cast<std::uint16_t>(index % 65521);
  bp_device cpu0{};
  REQUIRE(bp_device_resolve(runtime, "cpu:0", &cpu0) == BP_OK);
  const auto count = static_cast<std::int64_t>(tokens);
  bp_array* source = nullptr;
  REQUIRE(bp_array_create(runtime, &cpu0, BP_DTYPE_U16, &count, 1, values.data(), tokens * 2, &source) == BP_OK);
  std::vector<bp_device> devices;
  for (const Json& selector : options.value("devices", Json::array())) {
    bp_device device{};
    REQUIRE(bp_device_resolve(runtime, selector.get<std::string>().c_str(), &device) == BP_OK);
    devices.push_back(device);
  }
  std::vector<double> weights = options.value("weights", std::vector<double>{});
  std::vector<bp_schedule_entry> schedule;
  for (const Json& entry : options.value("schedule", Json::array())) {
    schedule.push_back({entry[0].get<std::int64_t>(), entry[1].get<std::int64_t>(), entry[2].get<std::int64_t>()});
  }
  // C lays a weight schedule out as one array, source_count weights an entry.
  std::vector<std::int64_t> weight_steps;
  for (const Json& entry : options.value("weight_schedule", Json::array())) {
    weight_steps.push_back(entry[0].get<std::int64_t>());
    for (const Json& weight : entry[1]) weights.push_back(weight.get<double>());
  }
  // The layout's arrays; names point into `layout`.
  const std::optional<Layout> layout =
      options.contains("layout") ? std::optional(layout_of(options["layout"])) : std::nullopt;
  std::vector<bp_mesh_axis> mesh;
  std::vector<const char*> batch_axes;
  std::vector<const char*> sequence_axes;
  if (layout) {
    for (const Layout::Axis& axis : layout->mesh) mesh.push_back({axis.name.c_str(), axis.size});
    for (const std::string& name : layout->batch) batch_axes.push_back(name.c_str());
    for (const std::string& name : layout->sequence) sequence_axes.push_back(name.c_str());
  }
  bp_batch_stream_options c{};
  c.struct_size = sizeof(c);
  c.batch_size = options.value("batch_size", std::int64_t{0});
  c.context = options.value("context", std::int64_t{0});
  c.devices = devices.data();
  c.device_count = devices.size();
  if (options.contains("dtype"))
    REQUIRE(bp_dtype_from_name(options["dtype"].get<std::string>().c_str(), &c.dtype) == BP_OK);
  c.seed = options.value("seed", std::uint64_t{0});
  c.rank = options.value("rank", std::int64_t{0});
  c.world_size = options.value("world_size", std::int64_t{1});
  c.prefetch = options.value("prefetch", std::int64_t{2});
  c.weights = weights.data();
  c.weight_count = weights.size();
  c.threads = options.value("threads", 0U);
  c.release_pages = options.value("release_pages", false) ? 1 : 0;
  c.state = state ? state->c_str() : nullptr;
  // C passes one array of starts per source: its count is the sources'.
  const CDocuments documents = c_documents(options);
  REQUIRE((documents.kind != BP_DOCUMENTS_STARTS || documents.starts.size() == 1));
  c.documents = documents.kind;
  c.document_token = documents.token;
  c.document_starts = documents.pointers.data();
  c.document_start_counts = documents.counts.data();
  c.max_documents = options.value("max_documents", std::int64_t{0});
  c.schedule = schedule.data();
  c.schedule_count = schedule.size();
  c.weight_steps = weight_steps.data();
  c.weight_step_count = weight_steps.size();
  if (layout) {
    c.mesh = mesh.data();
    c.mesh_axis_count = mesh.size();
    c.batch_axes = batch_axes.data();
    c.batch_axis_count = batch_axes.size();
    c.sequence_axes = sequence_axes.data();
    c.sequence_axis_count = sequence_axes.size();
    c.sequence_order =
        layout->sequence_order == Layout::SequenceOrder::kHeadTail ? BP_SEQUENCE_HEAD_TAIL : BP_SEQUENCE_CONTIGUOUS;
    c.mesh_ranks = layout->ranks.data();
    c.mesh_rank_count = layout->ranks.size();
  }
  bp_batch_stream* stream = nullptr;
  const bp_status status = bp_batch_stream_create(runtime, &source, 1, &c, &stream);
  Outcome outcome{bp_status_name(status), status == BP_OK ? "" : bp_last_error()};
  bp_batch_stream_destroy(stream);
  bp_array_destroy(source);
  bp_runtime_destroy(runtime);
  return outcome;
}

}  // namespace

TEST_CASE("[batches] every bad argument reads the same from C++ and C, as bad_stream_arguments.json says") {
  const Json file = cases_file();
  const Json& defaults = file["defaults"];
  const auto tokens = file["tokens"].get<std::uint64_t>();
  Runtime runtime(placement_options());
  std::vector<std::uint16_t> values(tokens);
  for (std::size_t index = 0; index < values.size(); ++index) values[index] = static_cast<std::uint16_t>(index % 65521);
  const Array source =
      Array::from_host(runtime, kCpu0, DType::kU16, {static_cast<std::int64_t>(tokens)}, values.data(), tokens * 2);
  REQUIRE(file["cases"].size() >= 20);
  for (const Json& test : file["cases"]) {
    const Json options = merged(defaults, test["options"]);
    CAPTURE(test.dump().substr(0, 200));
    const std::optional<std::string> state = state_of(runtime, source, defaults, test);
    const Outcome cxx = through_cxx(runtime, source, options, state);
    CHECK(cxx.status == test["status"].get<std::string>());
    CHECK(cxx.message == test["message"].get<std::string>());
    if (test.contains("not_c")) continue;  // a value no C field can hold: the case says why
    const Outcome c = through_c(options, tokens, state);
    CHECK(c.status == cxx.status);
    CHECK(c.message == cxx.message);
  }
}
