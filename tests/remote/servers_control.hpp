// The test servers' control port (object_servers.py): one line sent, its
// one-line answer read back, for the programs it starts.
#pragma once

#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

namespace backplane::testing {

inline std::string server_variable(const char* name) {
  const char* value = std::getenv(name);
  REQUIRE_MESSAGE(value != nullptr, name << " is not set: run this program through tests/remote/object_servers.py");
  return value;
}

inline std::string control(const std::string& line) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(std::stoi(server_variable("BACKPLANE_TEST_S3_CONTROL"))));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
  const std::string sent = line + "\n";
  REQUIRE(::write(fd, sent.data(), sent.size()) == static_cast<ssize_t>(sent.size()));
  std::string answer;
  char ch = 0;
  while (::read(fd, &ch, 1) == 1 && ch != '\n') answer += ch;
  ::close(fd);
  return answer;
}

}  // namespace backplane::testing
