#pragma once
// Kernel tables installed for every run of this user (`pipewright kernels import ... --install`): one folder
// each, <system>-<software>, under a home of their own. `--kernels installed` takes the one measured on the
// cluster's GPU, and `pipewright clusters` names it beside each preset; without it a run keeps the analytic
// model (tables lower no published run's error yet: docs/kernel-tables.md).
#include <string>
#include <vector>

#include "core/cluster.hpp"

namespace pw {

// $PIPEWRIGHT_KERNELS_HOME, else $XDG_DATA_HOME/pipewright/kernels, else $HOME/.local/share/pipewright/kernels.
std::string kernel_tables_home();

// The installed folders (subfolders of the home with a manifest.json), by name.
std::vector<std::string> installed_kernel_tables();

// The installed folder measured on `gpu` (kernels/table_cost_model.hpp's measured_on): of several, TensorRT-LLM's,
// then vLLM's, then SGLang's, then the first by name; empty when none is.
std::string installed_tables_for(const GpuSpec& gpu);

// --kernels as given, or for "installed" the folder installed_tables_for(gpu) finds (each of several folders
// separated by commas alike); BadInput naming the home and how to install when none is.
std::string resolve_kernels_option(const std::string& option, const GpuSpec& gpu);

}  // namespace pw
