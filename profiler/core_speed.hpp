#pragma once
// How fast one core of this machine does what a CPU profile spends its time on, measured in a few tens of
// milliseconds: what the profile's time estimate (profiler/cpu_profile_estimate.hpp) divides by.
namespace pw {

struct CoreSpeed {
  // FLOP/s of the fastest of several 256 x 256 x 256 float32 products with the CPU backend's matrices: the
  // layers' GEMMs run at about this, their other kernels slower.
  double flops = 0;
  // Random normal draws a second, as the CPU backend initialises each weight (executor/cpu_layers.cpp):
  // the one-block model of a 128k vocabulary is a billion of them.
  double normals = 0;
};

// Each rate over at least 20 ms of this core.
CoreSpeed measured_core_speed();

}  // namespace pw
