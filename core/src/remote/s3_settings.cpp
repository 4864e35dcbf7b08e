#include "remote/s3_settings.hpp"

#include "remote/object_url.hpp"

#include <backplane/error.hpp>

#include <fmt/format.h>

#include <fstream>
#include <map>
#include <string_view>

namespace backplane::detail {
namespace {

// One profile's entries of a shared file: key -> value.
using Section = std::map<std::string, std::string, std::less<>>;

std::string trimmed(std::string_view text) {
  const std::size_t begin = text.find_first_not_of(" \t\r");
  if (begin == std::string_view::npos) return {};
  const std::size_t end = text.find_last_not_of(" \t\r");
  return std::string(text.substr(begin, end - begin + 1));
}

// The section `wanted` of an INI file as the AWS tools write it: "[name]"
// headers, "key = value" lines, "#" and ";" comments; indented lines belong
// to a nested table (as "s3 =\n  addressing_style = path") and are skipped.
// nullopt when the file does not exist or has no such section.
std::optional<Section> read_section(const std::string& file, std::string_view wanted) {
  std::ifstream in(file);
  if (!in) return std::nullopt;
  std::optional<Section> found;
  bool inside = false;
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    const std::string text = trimmed(line);
    if (text.empty() || text[0] == '#' || text[0] == ';') continue;
    if (line[0] == ' ' || line[0] == '\t') continue;
    if (text.front() == '[') {
      if (text.back() != ']') {
        throw Error(ErrorCode::kConfig, fmt::format("{}:{}: a section header is \"[name]\"", file, number));
      }
      inside = trimmed(std::string_view(text).substr(1, text.size() - 2)) == wanted;
      if (inside && !found) found.emplace();
      continue;
    }
    const std::size_t equals = text.find('=');
    if (equals == std::string::npos) {
      throw Error(ErrorCode::kConfig, fmt::format("{}:{}: expected \"key = value\"", file, number));
    }
    if (inside) (*found)[trimmed(std::string_view(text).substr(0, equals))] = trimmed(text.substr(equals + 1));
  }
  return found;
}

std::string home_file(const Environment& environment, const char* variable, const char* relative) {
  if (std::optional<std::string> file = environment.get(variable); file && !file->empty()) return *file;
  const std::optional<std::string> home = environment.get("HOME");
  return home ? *home + "/" + relative : std::string();
}

std::string entry(const std::optional<Section>& section, std::string_view key) {
  if (!section) return {};
  const auto found = section->find(key);
  return found == section->end() ? std::string() : found->second;
}

std::optional<S3Credentials> credentials_in(const std::optional<Section>& section, const std::string& source) {
  std::string id = entry(section, "aws_access_key_id");
  std::string secret = entry(section, "aws_secret_access_key");
  if (id.empty() || secret.empty()) return std::nullopt;
  return S3Credentials{std::move(id), std::move(secret), entry(section, "aws_session_token"), source};
}

}  // namespace

std::string S3Settings::object_url(const std::string& bucket, const std::string& key) const {
  const std::string path = key.empty() ? std::string() : "/" + encode_key(key);
  if (!endpoint.empty()) {
    std::string base = endpoint;
    while (!base.empty() && base.back() == '/') base.pop_back();
    return fmt::format("{}/{}{}", base, bucket, path);
  }
  // A bucket name with dots does not match AWS's wildcard certificate as a
  // host name: path-style for those.
  if (bucket.find('.') != std::string::npos) {
    return fmt::format("https://s3.{}.amazonaws.com/{}{}", region, bucket, path);
  }
  return fmt::format("https://{}.s3.{}.amazonaws.com{}", bucket, region, path.empty() ? "/" : path);
}

std::string S3Settings::describe() const {
  return fmt::format("endpoint {} ({}), region {} ({}), {}", endpoint.empty() ? "AWS" : endpoint,
                     endpoint.empty() ? "no AWS_ENDPOINT_URL" : endpoint_source, region, region_source,
                     credentials ? "credentials from " + credentials->source : "no credentials (unsigned requests)");
}

S3Settings read_s3_settings(const Environment& environment) {
  S3Settings settings;
  if (std::optional<std::string> profile = environment.get("AWS_PROFILE"); profile && !profile->empty()) {
    settings.profile = *profile;
  }
  const std::string credentials_file = home_file(environment, "AWS_SHARED_CREDENTIALS_FILE", ".aws/credentials");
  const std::string config_file = home_file(environment, "AWS_CONFIG_FILE", ".aws/config");
  const std::optional<Section> stored = read_section(credentials_file, settings.profile);
  const std::optional<Section> config =
      read_section(config_file, settings.profile == "default" ? "default" : "profile " + settings.profile);
  if (settings.profile != "default" && !stored && !config) {
    throw Error(ErrorCode::kConfig, fmt::format("AWS_PROFILE names the profile {}, which neither {} nor {} has",
                                                settings.profile, credentials_file, config_file));
  }

  const std::optional<std::string> id = environment.get("AWS_ACCESS_KEY_ID");
  const std::optional<std::string> secret = environment.get("AWS_SECRET_ACCESS_KEY");
  if (id && secret && !id->empty() && !secret->empty()) {
    settings.credentials =
        S3Credentials{*id, *secret, environment.get("AWS_SESSION_TOKEN").value_or(""), "AWS_ACCESS_KEY_ID"};
  } else if (auto from_file = credentials_in(stored, fmt::format("{} [{}]", credentials_file, settings.profile))) {
    settings.credentials = std::move(from_file);
  } else {
    settings.credentials = credentials_in(config, fmt::format("{} [{}]", config_file, settings.profile));
  }

  const auto first = [&](std::initializer_list<const char*> variables, std::string_view key, std::string& value,
                         std::string* source) {
    for (const char* variable : variables) {
      if (std::optional<std::string> set = environment.get(variable); set && !set->empty()) {
        value = *set;
        if (source) *source = variable;
        return;
      }
    }
    if (std::string stored_value = entry(config, key); !stored_value.empty()) {
      value = std::move(stored_value);
      if (source) *source = fmt::format("{} [{}]", config_file, settings.profile);
    }
  };
  first({"AWS_REGION", "AWS_DEFAULT_REGION"}, "region", settings.region, &settings.region_source);
  first({"AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"}, "endpoint_url", settings.endpoint, &settings.endpoint_source);
  first({"AWS_CA_BUNDLE"}, "ca_bundle", settings.ca_bundle, nullptr);
  return settings;
}

}  // namespace backplane::detail
