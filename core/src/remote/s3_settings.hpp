// Where S3 requests go and how they are signed, read as the AWS tools read
// it: the variables first, then the shared files of the profile.
//
//   credentials  AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN),
//                else the profile's aws_access_key_id / aws_secret_access_key
//                (/ aws_session_token) in the credentials file, then in the
//                config file; else none: requests go unsigned (public buckets)
//   profile      AWS_PROFILE, else "default"
//   files        AWS_SHARED_CREDENTIALS_FILE (~/.aws/credentials),
//                AWS_CONFIG_FILE (~/.aws/config, where a profile's section
//                is [profile NAME], the default's [default])
//   region       AWS_REGION, AWS_DEFAULT_REGION, the profile's region,
//                else us-east-1
//   endpoint     AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, the profile's
//                endpoint_url; else AWS itself. A server of one's own is
//                addressed path-style (ENDPOINT/BUCKET/KEY), AWS
//                virtual-hosted (https://BUCKET.s3.REGION.amazonaws.com/KEY)
//   CA bundle    AWS_CA_BUNDLE, the profile's ca_bundle; else the system's
//
// Secrets are held here and handed to libcurl, never put in a message:
// `describe()` says where each setting came from, not what it is.
#pragma once

#include "util/environment.hpp"

#include <optional>
#include <string>

namespace backplane::detail {

struct S3Credentials {
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;  // empty: none
  std::string source;         // "AWS_ACCESS_KEY_ID", "/root/.aws/credentials [default]"
};

struct S3Settings {
  std::string region = "us-east-1";
  std::string region_source = "the default";
  std::string endpoint;  // empty: AWS
  std::string endpoint_source;
  std::optional<S3Credentials> credentials;  // nullopt: unsigned requests
  std::string ca_bundle;                     // empty: the system's
  std::string profile = "default";

  // The URL of an object (or, with an empty key, of the bucket, for listing).
  std::string object_url(const std::string& bucket, const std::string& key) const;
  // One line for messages: endpoint, region, and where the credentials come
  // from (never the credentials).
  std::string describe() const;
};

// Reads the settings from `environment` and the files it points to. Throws
// Error(kConfig) naming the file and line of a shared file that cannot be
// read as one (never its values), and Error(kConfig) for a profile named in
// AWS_PROFILE that neither file has.
S3Settings read_s3_settings(const Environment& environment);

}  // namespace backplane::detail
