/// \file
/// Files that several processes read and write at once: caches of compiled
/// modules and reference outputs.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace tensortune {

/// A suffix no other writer uses (this process id and a counter), for a
/// temporary file next to the one being written.
std::string unique_temp_suffix();

/// Writes `bytes` to `path` through a temporary file and a rename, so readers
/// see either no file or the whole of it. kIO error naming the path on failure.
void write_file_atomically(const std::string& path, std::string_view bytes);

/// The whole file, or nullopt when it cannot be opened.
std::optional<std::string> read_file_if_exists(const std::string& path);

}  // namespace tensortune
