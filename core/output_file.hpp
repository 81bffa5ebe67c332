#pragma once
// Every file a command writes (plans, traces, profiles, calibrations, schedule CSVs, SVGs, exports) goes
// through here, so that a full disk, a read-only folder or a kill half-way never leaves a truncated file
// or destroys the one that was there before.
#include <string>
#include <string_view>
#include <vector>

namespace pw {

// Writes `text` to a new file beside `path`, flushes it to the disk and renames it over `path`: a reader
// sees the old file or the whole new one. On failure the temporary file is removed, `path` is left as it
// was and Runtime "cannot write '<path>': <the system's reason>" is thrown. A path that exists and is not
// a regular file (a terminal, /dev/null, a pipe) is written in place; a symbolic link is followed. Missing
// folders on the way are made.
void write_output_file(const std::string& path, std::string_view text);

// A set of files written all or nothing (a plan with its launch files): every file goes to its temporary
// first; only when all are on the disk are they renamed over their targets, with signals held for those
// renames, and an old target is kept as a link until the last rename so that a failed one puts every
// replaced file back. On failure nothing of the set is left and Runtime names the file that failed.
struct OutputText {
  std::string path;
  std::string text;
};
void write_output_files(const std::vector<OutputText>& files);

// Installs handlers for SIGINT, SIGTERM and SIGHUP that remove every temporary file a write has open, then
// end the process by the same signal; and ignores SIGXFSZ, so that a write past the file size limit fails
// as a full disk does (reported, its temporary removed) instead of killing the process. For main().
// SIGKILL cannot be caught: it may leave a temporary beside its target, never a target cut short.
void remove_temporaries_on_signals();

namespace detail {
// The registry the handlers read: a temporary file's slot (-1 when none is free or the name is too long),
// and its release once the file is renamed or removed. write_output_files uses them; tests raise a signal
// between the two.
int track_temporary(const std::string& name);
void untrack_temporary(int slot);
}  // namespace detail

}  // namespace pw
