#pragma once
// PyTorch pipelining's schedule CSV (torch.distributed.pipelining.schedules: _dump_csv/_load_csv;
// torchtitan's pipeline_parallel_schedule_csv): one row per rank, one cell per action in execution
// order, an action "<stage><op><micro-batch>". PyTorch's ops and ours:
//   F -> F,  I (backward input) -> B,  W -> W,  B (full backward) -> BW,
//   SEND_F / RECV_F / SEND_B / RECV_B -> the same communication ops,
//   (<stage>F<mb>;<stage>B<mb>)OVERLAP_F_B -> FB (forward overlapped with a full backward); any other
//   composite of computations ((7B3;0F7), (0F1;1I0), three halves) -> its actions in the order listed, as
//   PyTorch's runtime runs them.
// PyTorch writes an idle step (None) as an empty cell and ends rows with "\r\n" (Python's csv
// writer); empty cells are skipped on import, and refused in a file with sends and receives (PyTorch's
// compute_comms format has none). UNSHARD, RESHARD, REDUCE_GRAD and WAIT_REDUCE_GRAD (FSDP and
// data-parallel bookkeeping, which the simulator models on its own) are skipped too, and so are torch 2.15's
// send waits <stage>WAIT_SEND_F<mb> / <stage>WAIT_SEND_B<mb> (the simulator and the executor end a send when
// its transfer arrives). Receives run as PyTorch runs them: posted where they stand, waited for by the action
// that consumes the tensor (sim/pipeline_sim.hpp, executor/runtime.hpp).
// A lowered schedule is written as torch 2.15's own lowering writes the same action list, since its
// compute_comms loader needs it (schedules.py, _PipelineScheduleRuntime._prepare_schedule_with_comms):
// a wait for every send (_validate_send_waits; placed by _add_wait_send's rule: a SEND_F's right after the
// rank's backward of that stage and micro-batch, the rest at the end of the row), and REDUCE_GRAD,
// WAIT_REDUCE_GRAD after each stage's last weight gradient and its sends (_add_reduce_grad; a loaded
// compute_comms file gets none added, and without them the runtime never scales the gradients). No
// UNSHARD/RESHARD: a compute_comms file for FSDP stages needs them added by hand.
#include <string>

#include "schedules/ir.hpp"

namespace pw {

// Compute-only schedules give PyTorch's "compute_only" format, lowered ones its "compute_comms". BadInput
// (check_pytorch_csv_copies) for a schedule with two copies of the model.
std::string schedule_to_pytorch_csv(const Schedule& s);
// BadInput naming --export-csv when schedule `name` runs more than one copy of the model: PyTorch's
// pipelining sends every micro-batch through every stage, and its CSV has no way to say otherwise.
void check_pytorch_csv_copies(const std::string& name, int copies);

// Reads a CSV into the IR and validates it (validate(): a broken schedule is a BadInput carrying the
// grid with the offending cell marked). `source` names the text in messages and becomes the schedule's
// name. The placement is detected: loop when stage s sits on rank s mod p, V when rank r holds stages
// r and 2p - 1 - r, explicit otherwise. `microbatches` 0 means one more than the largest micro-batch
// index found. The schedule is lowered when the file has communication actions.
Schedule schedule_from_pytorch_csv(const std::string& text, const std::string& source, int microbatches = 0);

}  // namespace pw
