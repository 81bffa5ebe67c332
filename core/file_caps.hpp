#pragma once
// Caps on what pipewright's input files may hold: how many layers, actions or entries, and the ranges
// of the physical figures (seconds, bytes, rates). A count above its cap is refused before anything
// is allocated for it. The figure caps lie far beyond any real machine or model and keep every sum and
// product the tool forms finite: bytes (1e18) x layers (1e5) x micro-batches in flight (1e6) is 1e29,
// and its square, which the layer split forms, 1e58; a FLOP count of the largest transformer shape
// (1e39) over the slowest GPU (1e6 FLOP/s) is 1e33 s, 1e66 squared.
namespace pw {

inline constexpr long kMaxLayers = 100'000;               // layers of a model; the largest published have a few hundred
// A model's layers with its embedding, head and up to 16 multi-token prediction modules: what a split indexes.
inline constexpr long kMaxModelLayers = kMaxLayers + 18;
inline constexpr long kMaxScheduleActions = 1'000'000;    // actions of a schedule file, all ranks together
inline constexpr long kMaxScheduleStages = kMaxLayers;    // a stage holds at least one layer
inline constexpr long kMaxScheduleRanks = kMaxScheduleStages;
inline constexpr long kMaxScheduleMicrobatches = kMaxScheduleActions;  // each needs its own F on every stage
inline constexpr long kMaxNodes = 1'000'000;              // nodes of a cluster
inline constexpr long kMaxGpusPerNode = 1L << 20;         // the ideal cluster's own figure
inline constexpr long kMaxProfileEntries = 100'000;       // entries of each list in a profile or calibration file
inline constexpr long kMaxRepetitions = 1'000'000'000;    // a profile's repetitions of one measurement
// A layer's width, head count, head size or latent rank: the widest published is 73,728 (PaLM's ffn). The cap
// keeps their sums (MLA's nope + rope head size) and the double products the cost model forms exact.
inline constexpr long kMaxDimension = 1'000'000;
inline constexpr long kMaxVocab = 100'000'000;  // the largest published vocabularies hold a few hundred thousand
// Bytes of one input file, refused before it is parsed: 1M actions of a plan's schedule take about 10 MB,
// the largest kernel tables 12 MB. A model or cluster file of 100,000 explicit layers, pretty-printed, takes
// about 30 MB.
inline constexpr long kMaxInputFileBytes = 256L << 20;
inline constexpr long kMaxModelFileBytes = 64L << 20;

// The range a figure read from a file may take, both ends included.
struct FigureRange {
  double min;
  double max;
  const char* unit;
};

inline constexpr FigureRange kSecondsRange{0, 1e6, "s"};              // a layer's phase, a latency, a measured time
inline constexpr FigureRange kSecondsPerUnitRange{0, 1, "s"};        // per FLOP, byte or parameter: a fitted rate
inline constexpr FigureRange kFactorRange{0, 1e6, "x"};               // a fitted scale or efficiency
inline constexpr FigureRange kBytesRange{0, 1e18, "B"};               // a layer's bytes, a GPU's memory
inline constexpr FigureRange kBandwidthRange{1, 1e18, "B/s"};         // a link or the memory of a GPU
inline constexpr FigureRange kPeakTflopsRange{1e-6, 1e6, "TFLOP/s"};  // a GPU's peak: 1 MFLOP/s to 1 EFLOP/s
inline constexpr FigureRange kCoresRange{0, 1048576, "cores"};         // CPU cores ranks share (2^20 at most)

}  // namespace pw
