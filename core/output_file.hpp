#pragma once
// Every file a command writes (plans, traces, profiles, calibrations, schedule CSVs, SVGs, exports) goes
// through here, so that a full disk, a read-only folder or a kill half-way never leaves a truncated file
// or destroys the one that was there before.
#include <string>
#include <string_view>

namespace pw {

// Writes `text` to a new file beside `path`, flushes it to the disk and renames it over `path`: a reader
// sees the old file or the whole new one. On failure the temporary file is removed, `path` is left as it
// was and Runtime "cannot write '<path>': <the system's reason>" is thrown. A path that exists and is not
// a regular file (a terminal, /dev/null, a pipe) is written in place; a symbolic link is followed. Missing
// folders on the way are made.
void write_output_file(const std::string& path, std::string_view text);

}  // namespace pw
