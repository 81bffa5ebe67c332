#pragma once
// The TCP group's join as bytes (executor/tcp_process_group.hpp): each process's hello to process 0 and
// process 0's answer. A hello is read in full (a fixed size) and its magic, version and job token checked
// before its rank or world size are looked at; an answer's length is checked before anything is allocated
// for it.
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "executor/job_token.hpp"

namespace pw {

// Who a process is, for messages that name it.
struct Card {
  int pid = 0;
  std::string host;
};

struct Hello {
  Sha256 token{};
  int rank = 0;
  int world = 0;
  Card card;
};

constexpr size_t kHostBytes = 64;
constexpr size_t kCardBytes = 4 + kHostBytes;                   // pid, host
constexpr size_t kHelloBytes = 4 + 4 + 32 + 4 + 4 + kCardBytes;  // magic, version, token, rank, world, card
constexpr size_t kAnswerHeadBytes = 4 + 4 + 4;                  // magic, status, length
// The longest refusal process 0 sends (a welcome's length follows from the world size).
constexpr size_t kLongestRefusal = 4096;

std::array<unsigned char, kHelloBytes> hello_to_wire(const Hello& hello);

// The hello in `bytes` (kHelloBytes of them) if it is one of this job's: nothing, with `why` set, when it
// is not a pipewright hello of this version ("not a pipewright hello") or carries another job token
// ("another job token, claiming rank 1 of 2": what it claims, for the warning). Rank and world size are
// returned as sent, unchecked.
inline constexpr const char* kAnotherJobToken = "another job token";
std::optional<Hello> hello_from_wire(const unsigned char* bytes, const Sha256& token, std::string& why);

// Process 0's answers: a welcome listing every process's card (by rank), or a refusal's text.
std::vector<unsigned char> welcome_to_wire(const std::vector<Card>& cards);
std::vector<unsigned char> refusal_to_wire(const std::string& text);

// An answer's head (kAnswerHeadBytes): whether it is a welcome, and how many bytes follow. Nothing, with
// `why` set, for a head that is no answer or announces more bytes than a welcome of `world` processes or a
// refusal holds.
struct AnswerHead {
  bool welcome = false;
  size_t length = 0;
};
std::optional<AnswerHead> answer_head_from_wire(const unsigned char* bytes, int world, std::string& why);
// The cards of a welcome's body (answer_head_from_wire checked its length).
std::vector<Card> cards_from_wire(const std::vector<unsigned char>& body, int world);

}  // namespace pw
