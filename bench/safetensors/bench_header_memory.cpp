// Peak memory of reading a huge safetensors header (read_header: the bytes,
// the JSON parse, validation, the Header) against the header's size, with
// the baseline measured in the same run: reading the header bytes alone.
// Each measurement runs in a fresh child process, from its resident size
// before the call to its peak (VmHWM, reset through /proc/self/clear_refs).
//
//   bench_safetensors_header_memory [--tensors N] [--name-length L] [--keep FILE] [--cli BACKPLANE]
//
// With --cli, also `BACKPLANE inspect --json FILE` (output to /dev/null): its
// peak resident size (the child's maxrss) against the header's size, and its
// wall time against read_header's in the same run.
//
// The default, 1.44 million tensors with names "t00000" to "t1439999", gives a header of
// about 99 MB.
#include <backplane/safetensors.hpp>

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

namespace {

std::uint64_t status_kib(const char* field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(field, 0) == 0) return std::strtoull(line.c_str() + std::strlen(field), nullptr, 10);
  }
  return 0;
}

// Bytes from the resident size before `body` to the peak while it ran, in a
// child process; -1 when the child failed.
long long peak_growth(const std::function<void()>& body) {
  int fds[2];
  if (::pipe(fds) != 0) return -1;
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    { std::ofstream("/proc/self/clear_refs") << "5"; }  // VmHWM := VmRSS
    const std::uint64_t before = status_kib("VmRSS:");
    long long growth = -1;
    try {
      body();
      growth = static_cast<long long>(status_kib("VmHWM:") - before) * 1024;
    } catch (const std::exception& error) {
      std::fprintf(stderr, "%s\n", error.what());
    }
    if (::write(fds[1], &growth, sizeof(growth)) != sizeof(growth)) ::_exit(1);
    ::_exit(0);
  }
  ::close(fds[1]);
  long long growth = -1;
  if (::read(fds[0], &growth, sizeof(growth)) != sizeof(growth)) growth = -1;
  ::close(fds[0]);
  ::waitpid(pid, nullptr, 0);
  return growth;
}

// Writes a file with `count` one-byte U8 tensors of shape [1]; returns the header size.
std::uint64_t write_file(const std::filesystem::path& path, std::size_t count, std::size_t name_length) {
  std::string header = "{";
  header.reserve(count * (name_length + 64));
  for (std::size_t index = 0; index < count; ++index) {
    std::string name = fmt::format("t{:0{}}", index, name_length > 1 ? name_length - 1 : 1);
    header += fmt::format("{}\"{}\":{{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[{},{}]}}", index == 0 ? "" : ",",
                          name, index, index + 1);
  }
  header += "}";
  while (header.size() % 8 != 0) header += ' ';
  const std::uint64_t size = header.size();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  for (int byte = 0; byte < 8; ++byte) out.put(static_cast<char>((size >> (8 * byte)) & 0xFF));
  out << header;
  out.close();
  std::filesystem::resize_file(path, 8 + size + count);  // zero data, sparse
  return size;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

struct CommandRun {
  double seconds = -1;
  long long peak_bytes = -1;  // maxrss of the command's process
};

// Runs `program inspect --json file` with stdout to /dev/null.
CommandRun run_inspect(const std::string& program, const std::filesystem::path& file) {
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, 1);
    ::execl(program.c_str(), program.c_str(), "inspect", "--json", file.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  struct rusage usage {};
  if (pid < 0 || ::wait4(pid, &status, 0, &usage) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return {};
  return {seconds_since(start), static_cast<long long>(usage.ru_maxrss) * 1024};
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t tensors = 1'440'000;
  std::size_t name_length = 6;
  std::string keep;
  std::string cli;
  for (int index = 1; index + 1 < argc; index += 2) {
    const std::string flag = argv[index];
    if (flag == "--tensors") {
      tensors = std::strtoull(argv[index + 1], nullptr, 10);
    } else if (flag == "--name-length") {
      name_length = std::strtoull(argv[index + 1], nullptr, 10);
    } else if (flag == "--keep") {
      keep = argv[index + 1];
    } else if (flag == "--cli") {
      cli = argv[index + 1];
    }
  }
  const std::filesystem::path path =
      keep.empty() ? std::filesystem::temp_directory_path() / fmt::format("bench-header-{}.safetensors", ::getpid())
                   : std::filesystem::path(keep);
  const std::uint64_t header_size = write_file(path, tensors, name_length);

  const long long bytes_only = peak_growth([&] {
    std::vector<char> bytes(header_size + 8);
    std::ifstream(path, std::ios::binary).read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  });
  std::size_t parsed_count = 0;
  const long long parse = peak_growth([&] {
    backplane::safetensors::Header header = backplane::safetensors::read_header(path);
    parsed_count = header.tensors.size();
    if (parsed_count != tensors) throw std::runtime_error("wrong tensor count");
  });
  double library_seconds = -1;
  CommandRun command;
  if (!cli.empty()) {
    // The library's inspect, timed in a child like the command (a fresh heap).
    int fds[2];
    if (::pipe(fds) == 0) {
      const pid_t pid = ::fork();
      if (pid == 0) {
        const auto start = std::chrono::steady_clock::now();
        const backplane::safetensors::Header header = backplane::safetensors::read_header(path);
        const double took = header.tensors.size() == tensors ? seconds_since(start) : -1;
        if (::write(fds[1], &took, sizeof(took)) != sizeof(took)) ::_exit(1);
        ::_exit(0);
      }
      ::close(fds[1]);
      if (::read(fds[0], &library_seconds, sizeof(library_seconds)) != sizeof(library_seconds)) library_seconds = -1;
      ::close(fds[0]);
      ::waitpid(pid, nullptr, 0);
    }
    command = run_inspect(cli, path);
  }
  if (keep.empty()) std::filesystem::remove(path);
  if (bytes_only < 0 || parse < 0) {
    fmt::print(stderr, "a measurement failed\n");
    return 1;
  }
  const double megabytes = 1e6;
  fmt::print("header: {:.1f} MB, {} tensors, names of {} bytes\n", header_size / megabytes, tensors, name_length);
  fmt::print("baseline, reading the header bytes: peak +{:.1f} MB ({:.2f}x the header)\n", bytes_only / megabytes,
             static_cast<double>(bytes_only) / header_size);
  fmt::print("read_header (bytes, parse, validation, Header): peak +{:.1f} MB ({:.2f}x the header)\n",
             parse / megabytes, static_cast<double>(parse) / header_size);
  fmt::print("ratio to the baseline: {:.2f}x\n", static_cast<double>(parse) / bytes_only);
  if (!cli.empty()) {
    if (command.seconds < 0 || library_seconds < 0) {
      fmt::print(stderr, "the inspect command or the library's inspect failed\n");
      return 1;
    }
    fmt::print(
        "backplane inspect --json: peak resident {:.1f} MB ({:.2f}x the header), {:.2f} s; read_header "
        "alone {:.2f} s ({:.2f}x)\n",
        command.peak_bytes / megabytes, static_cast<double>(command.peak_bytes) / header_size, command.seconds,
        library_seconds, command.seconds / library_seconds);
  }
  return 0;
}
