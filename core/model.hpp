#pragma once
// A model is an ordered list of layers: embedding, transformer blocks, and a head
// (final norm + LM head + loss), or layers with explicit measured/theoretical costs.
// Costs that depend on the micro-batch, sequence length and tensor parallelism are
// computed on demand by layer_work() (core/layer_work.hpp).
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/mla.hpp"
#include "core/moe.hpp"

namespace pw {

// Mtp: one of DeepSeek-V3's multi-token-prediction modules (a projection of the last hidden state and the
// next token's embedding, one transformer block, its own loss through the shared LM head), placed as
// Megatron-Core places them: after the last block, before the head, on the last stage.
enum class LayerKind { Embedding, Block, Head, Explicit, Mtp };
// Gelu: up, GeLU, down. SwiGlu: gate and up, SiLU(gate) x up, down (Llama, Phi-3's fused gate_up).
// ReluSquared: up, ReLU(x)^2, down, not gated (Nemotron).
// GeGlu: Gemma's gated MLP with a tanh GELU gate, the same GEMMs and traffic as SwiGLU.
enum class MlpKind { Gelu, SwiGlu, ReluSquared, GeGlu };
const char* to_string(MlpKind k);  // "gelu", "swiglu", "relu2", "geglu"
bool gated(MlpKind k);             // gate and up projections: SwiGLU, GeGLU
enum class NormKind { LayerNorm, RmsNorm };

// The shape of a decoder-only transformer, as config.json files and papers give it.
struct TransformerConfig {
  std::string family;      // "gpt" or "llama" (style of block); informational for presets
  int hidden = 0;          // h
  int layers = 0;          // L transformer blocks
  int heads = 0;           // a
  int kv_heads = 0;        // k (grouped-query attention); = heads for multi-head attention
  int head_dim = 0;        // hd; hidden / heads unless the config says otherwise
  int ffn = 0;             // MLP intermediate size f (4h for GPT)
  long vocab = 0;          // V
  int max_seq_len = 0;     // default sequence length s
  MlpKind mlp = MlpKind::Gelu;
  NormKind norm = NormKind::LayerNorm;
  bool tied_embeddings = false;
  bool learned_positions = false;  // GPT-2/3 learned position embeddings (s x h parameters)
  bool bias = false;               // linear-layer biases (GPT) or none (Llama)
  bool qkv_bias = false;           // biases on the QKV projection only (Qwen2); implied by `bias`
  bool dropout = false;            // dropout masks stored (Korthikanti's accounting) or not
  bool qk_norm = false;            // RMSNorm of each head's queries and keys (Qwen3): 2 x head_dim weights a block
  bool post_norms = false;         // a norm after attention and after the MLP too (Gemma 2 and 3): 4 a block
  int attention_window = 0;        // keys a query attends at most, in every block (sliding window); 0: all
  // With a window, block i (from 0) attends to all keys when (i + 1) % full_attention_every == 0: Gemma 2's
  // alternating local and global layers (2), Gemma 3's five local to one global (6). 0: every block slides.
  int full_attention_every = 0;
  // The window of block i under that pattern (i < 0: attention_window); 0: all keys.
  int block_window(int i) const;
  // gpt-oss's attention sinks: one learned logit per head in every block's softmax.
  bool attention_sinks = false;
  std::optional<MoeConfig> moe;  // mixture of experts in the blocks its pattern names; absent: dense
  std::optional<MlaConfig> mla;  // multi-head latent attention instead of (grouped-query) multi-head
  int mtp_layers = 0;            // multi-token-prediction modules after the blocks
  // Whether block i's MLP is routed experts (the MTP modules' blocks are, in an MoE model; i >= layers).
  bool moe_block(int i) const { return moe && (i >= layers || moe->moe_block(i)); }
};

// Costs given directly (seconds and bytes for one micro-batch at the model's own shape).
// They are used as given, whatever the cluster, micro-batch size or tp.
struct ExplicitCosts {
  double forward_s = 0;
  double backward_input_s = 0;
  double backward_weight_s = 0;
  double output_bytes = 0;      // sent to the next layer
  double activation_bytes = 0;  // stored from F until its backward
  double parameter_bytes = 0;   // weights only (bytes as given)
  // B and W run as one backward pass (a BW action), where measured: running them apart can cost more
  // (PyTorch's split backward makes two autograd passes). Absent: B + W.
  std::optional<double> backward_s;
};

struct Layer {
  std::string name;
  LayerKind kind = LayerKind::Block;
  std::optional<ExplicitCosts> explicit_costs;  // set iff kind == Explicit
  // A block's position among the model's blocks, which decides its sliding window
  // (TransformerConfig::block_window); -1 for other layers and hand-made ones.
  int block = -1;
};

// An extra data edge of a layer graph, besides the chain i -> i + 1: layer `to` also reads the output
// of layer `from` (a skip connection, an encoder output that every decoder layer reads). A pipeline
// relays the tensor through the stages in between, so it crosses every stage boundary between `from`
// and `to`. Edges without bytes carry `from`'s own output, which crosses a boundary once however many
// of them need it there (an encoder output read by every decoder layer is relayed once); an edge with
// bytes is a tensor of its own.
struct LayerEdge {
  int from = 0;
  int to = 0;
  std::optional<double> bytes;  // what `to` receives per micro-batch (per tp rank); absent: from's output

  friend bool operator==(const LayerEdge&, const LayerEdge&) = default;
};

struct Model {
  std::string name;
  std::optional<TransformerConfig> transformer;  // absent when every layer is Explicit
  std::vector<Layer> layers;
  std::vector<LayerEdge> edges;  // empty: a chain (the common case)

  int num_layers() const { return static_cast<int>(layers.size()); }
  // Number of transformer blocks (the layers --split counts); every layer for explicit models.
  int num_blocks() const;
  // Index of the i-th block in `layers` (embedding comes first when present).
  int block_index(int i) const;
  // Every block's index in `layers`, in order (every layer's for explicit models).
  std::vector<int> block_indices() const;
  bool has_explicit_costs() const;
  int default_seq_len() const { return transformer ? transformer->max_seq_len : 0; }
};

// Builds the layer list (embedding, L blocks, head) of a transformer.
Model make_transformer_model(const std::string& name, const TransformerConfig& config);
// A transformer model cut to one block of each kind it has: its distinct layers (embedding, a dense block,
// an MoE block, head), what the profilers time, without the memory of every other block. `model` must
// have a transformer shape.
Model one_block_per_kind(const Model& model);
// one_block_per_kind's blocks `copies` times over (a dense and an MoE one alternating where the model has
// both), between the embedding and the head: the layers a profiler's pass runs one after another.
Model blocks_per_kind_copies(const Model& model, int copies);

// Built-in presets: gpt3-1.3b ... llama3-405b. Throws BadInput naming the list for unknown names.
std::vector<std::string> model_preset_names();
Model model_preset(const std::string& name);

// Reads a Hugging Face config.json (llama, mistral, qwen2, gpt2, gpt_neox) or a pipewright
// model JSON ({"name", "layers": [...]} or {"name", "transformer": {...}}) from text. A pipewright
// model JSON may add "edges": [[from, to], [from, to, bytes], ...] (layer indices, from < to): a layer
// graph's data edges besides the chain (see LayerEdge).
// `source` names the file in error messages.
Model model_from_json_text(const std::string& text, const std::string& source);
// A preset name, a path to a JSON file, or a folder holding a config.json (a Hugging Face snapshot).
Model load_model(const std::string& name_or_path);
// The pipewright model JSON form (transformer models serialise their config; explicit ones their layers).
std::string model_to_json_text(const Model& model);

// The default sequence length of a Hugging Face config that states no pretraining length: at most this
// much of max_position_embeddings (Llama 3's pretraining length, Meta's paper; Megatron-Bridge's Llama 3
// pretraining recipes use it too).
inline constexpr int kDefaultSeqLenCap = 8192;

// Parameter count of the whole model (tied embeddings counted once), without its MTP modules, as DeepSeek
// counts V3's 671B. Active: what one token runs through, top_k of each MoE block's routed experts and the
// input embedding (DeepSeek and OpenAI leave the embedding out of their active counts; Mistral keeps it).
double parameter_count(const Model& model);
double active_parameter_count(const Model& model);

// Parameters of one layer as one GPU holds them: the dense part (attention, norms, dense MLP, router,
// shared experts) sharded by tp, and the routed experts divided over ep x etp (Megatron-Core's expert
// parallelism and expert tensor parallelism), which reduce their gradients over another group.
struct LayerParameters {
  double dense = 0;
  double routed = 0;
  double total() const { return dense + routed; }
};
// Weights of tp-sharded matrices and the biases of column-parallel layers are divided by tp; norms,
// row-parallel biases, learned positions, MLA's down projections and the router are replicated. The head
// holds its own copy of the embedding matrix even when tied (Megatron keeps it on the last stage when
// pp > 1), and so does an MTP module (which reads the next tokens' embeddings). `block` is the layer's
// Layer::block (its MoE or dense MLP); an MTP module's block is layers + its index.
LayerParameters layer_parameters(const TransformerConfig& config, LayerKind kind, int block, int tp, int ep = 1,
                                 int etp = 1);

namespace detail {
// The two readers behind model_from_json_text, by form (core/hf_config.cpp, core/model_json.cpp).
Model model_from_hf_config(const nlohmann::json& config, const std::string& source);
Model model_from_pipewright_json(const nlohmann::json& model, const std::string& source);
// The model name a file gives when it names none: its stem without ".json" / ".config".
std::string model_name_from_source(const std::string& source);
}  // namespace detail

}  // namespace pw
