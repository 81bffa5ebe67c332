#pragma once
// The schedule IR: per-rank ordered actions on (stage, micro-batch), a stage-to-rank placement,
// and (after lowering) the sends and receives between ranks. Generators write it, the validator
// checks it, the simulator times it, the executor runs it, exporters write it.
#include <string>
#include <vector>

namespace pw {

enum class Op {
  F,      // forward
  B,      // backward, input gradient only
  W,      // backward, weight gradient only
  BW,     // full backward (B then W, one action)
  FB,     // composite: forward of (stage, mb) overlapped with full backward of (stage2, mb2)
  SendF,  // send the forward output of `stage` for `microbatch` to stage + 1
  RecvF,  // receive the forward input of `stage` for `microbatch` from stage - 1
  SendB,  // send the input gradient of `stage` for `microbatch` to stage - 1
  RecvB,  // receive the output gradient of `stage` for `microbatch` from stage + 1
};

bool is_compute(Op op);
bool is_comm(Op op);
const char* to_string(Op op);  // "F", "B", "W", "BW", "FB", "SEND_F", "RECV_F", "SEND_B", "RECV_B"

struct Action {
  Op op = Op::F;
  int stage = 0;
  int microbatch = 0;
  int stage2 = -1;       // FB only: the backward half
  int microbatch2 = -1;

  friend bool operator==(const Action&, const Action&) = default;
};

// Text form: "<stage><op><micro-batch>", e.g. "2F0", "0B3", "1W3", "1BW3", "3SEND_F1", "0RECV_B2";
// the composite is "<F action>&<BW action>", e.g. "1F4&1BW0".
std::string to_text(const Action& a);
Action action_from_text(const std::string& text);  // throws BadInput with the offending text

enum class PlacementKind { Loop, V, Explicit };

struct Placement {
  PlacementKind kind = PlacementKind::Loop;
  std::vector<int> stage_rank;  // stage -> rank
  int ranks = 0;

  int rank_of(int stage) const { return stage_rank[static_cast<size_t>(stage)]; }
  int stages() const { return static_cast<int>(stage_rank.size()); }
  static Placement loop(int ranks, int chunks);  // stage s on rank s mod ranks
  static Placement v(int ranks);                 // rank r holds stages r and 2 ranks - 1 - r
};
const char* to_string(PlacementKind kind);  // "loop", "v", "explicit"
// The placement the per-rank lists imply: each stage on the rank whose compute actions name it first;
// loop when that is stage s on rank s mod p, V when rank r holds stages r and 2p - 1 - r, explicit
// otherwise. BadInput naming `source` when there are no actions or a stage below the largest has none.
Placement detect_placement(const std::vector<std::vector<Action>>& ranks, const std::string& source);

struct Schedule {
  std::string name;  // generator name, e.g. "1f1b"
  int microbatches = 0;
  Placement placement;
  std::vector<std::vector<Action>> ranks;  // per rank, in execution order
  bool lowered = false;                    // sends/receives inserted
  // Copies of the model, each a pipeline of its own stages: copy c is stages [c P, (c + 1) P) with
  // P = num_stages() / copies, its stage c P + k running the layers of the model's part k, and micro-batch
  // mb runs on copy mb % copies only (so back-to-back iterations keep each micro-batch's copy). 1 for
  // every schedule but bidirectional DualPipe, whose second copy enters at the last rank.
  int copies = 1;

  int num_ranks() const { return placement.ranks; }
  int num_stages() const { return placement.stages(); }
  int stages_per_copy() const { return num_stages() / copies; }
  int copy_of_stage(int stage) const { return stage / stages_per_copy(); }
  // The model part (layers) a stage runs: the stage itself without copies.
  int part_of_stage(int stage) const { return stage % stages_per_copy(); }
  bool runs_on(int stage, int microbatch) const { return copy_of_stage(stage) == microbatch % copies; }
  // Whether a micro-batch's forward leaves `stage` for stage + 1 (not at its copy's last stage), and its
  // input gradient for stage - 1 (not at its copy's first).
  // (The simulator asks for every action it sets up: one copy answers without a division.)
  bool has_next(int stage) const {
    return copies == 1 ? stage + 1 < num_stages() : part_of_stage(stage) + 1 < stages_per_copy();
  }
  bool has_previous(int stage) const { return copies == 1 ? stage > 0 : part_of_stage(stage) > 0; }
};

// Whether any rank's list holds an F&B composite (Op::FB).
bool has_composites(const Schedule& s);

// Adds sends and receives: a send right after the compute action that produces the tensor, a receive
// right before the first action that consumes it; none between stages on the same rank. Compute order
// is never changed.
Schedule lower(const Schedule& compute_only);
// The compute-only lists of a lowered schedule.
Schedule strip_comm(const Schedule& lowered);

// Grid view: a header line of step numbers ("step   | 0   1   2"), then one line per rank
// ("rank 0 | 0F0 0F1 0BW0"), cells in text form left-aligned and padded to one width, trailing
// blanks trimmed.
std::string to_grid(const Schedule& s);
// The same grid with the given cells wrapped in [ ] (validation errors point at cells this way).
struct GridCell {
  int rank = 0;
  int step = 0;
};
std::string to_grid(const Schedule& s, const std::vector<GridCell>& marked);
// At most `most_ranks` ranks and `most_steps` steps of it, centred on the first marked cell (the one an
// error names; the others show where they fall inside), with a first line "(ranks 0-7 of 64, steps
// 120-151 of 5000)" when it leaves any out: what an error shows of a schedule of millions of actions.
std::string to_grid_around(const Schedule& s, const std::vector<GridCell>& marked, int most_ranks, int most_steps);
// JSON round trip: {"format": "pipewright-schedule", "version": 1, "name", "microbatches",
// "placement": {"kind": "loop"|"v"|"explicit", "stage_rank": [...], "ranks": p},
// "ranks": [["0F0", ...], ...], "lowered": bool, "copies": c (written where it is not 1; read as 1 when
// absent)}. Reading checks the structure (BadInput naming
// `source` and the field), not the schedule itself: validate() does that.
std::string schedule_to_json_text(const Schedule& s);
Schedule schedule_from_json_text(const std::string& text, const std::string& source);

}  // namespace pw
