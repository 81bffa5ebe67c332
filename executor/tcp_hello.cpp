#include "executor/tcp_hello.hpp"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "executor/tcp_socket.hpp"

namespace pw {
namespace {

constexpr unsigned char kMagic[4] = {'P', 'W', 'T', 'G'};
constexpr std::uint32_t kWireVersion = 2;

void put_card(unsigned char* at, const Card& c) {
  put_u32(at, static_cast<std::uint32_t>(c.pid));
  std::memset(at + 4, 0, kHostBytes);
  std::memcpy(at + 4, c.host.data(), std::min(c.host.size(), kHostBytes - 1));
}

Card get_card(const unsigned char* at) {
  const char* host = reinterpret_cast<const char*>(at + 4);
  return {static_cast<int>(get_u32(at)), std::string(host, strnlen(host, kHostBytes))};
}

std::vector<unsigned char> answer(std::uint32_t status, size_t length) {
  std::vector<unsigned char> out(kAnswerHeadBytes + length);
  std::memcpy(out.data(), kMagic, 4);
  put_u32(out.data() + 4, status);
  put_u32(out.data() + 8, static_cast<std::uint32_t>(length));
  return out;
}

}  // namespace

std::array<unsigned char, kHelloBytes> hello_to_wire(const Hello& hello) {
  std::array<unsigned char, kHelloBytes> out{};
  std::memcpy(out.data(), kMagic, 4);
  put_u32(out.data() + 4, kWireVersion);
  std::memcpy(out.data() + 8, hello.token.data(), hello.token.size());
  put_u32(out.data() + 40, static_cast<std::uint32_t>(hello.rank));
  put_u32(out.data() + 44, static_cast<std::uint32_t>(hello.world));
  put_card(out.data() + 48, hello.card);
  return out;
}

std::optional<Hello> hello_from_wire(const unsigned char* bytes, const Sha256& token, std::string& why) {
  if (std::memcmp(bytes, kMagic, 4) != 0 || get_u32(bytes + 4) != kWireVersion) {
    why = "not a pipewright hello";
    return std::nullopt;
  }
  if (!same_digest(token, bytes + 8)) {
    // Named with the rank it claims, so that whoever reads process 0's warning knows what it tried to take.
    why = fmt::format("{}, claiming rank {} of {}", kAnotherJobToken, get_u32(bytes + 40), get_u32(bytes + 44));
    return std::nullopt;
  }
  Hello h;
  std::memcpy(h.token.data(), bytes + 8, h.token.size());
  h.rank = static_cast<int>(get_u32(bytes + 40));
  h.world = static_cast<int>(get_u32(bytes + 44));
  h.card = get_card(bytes + 48);
  return h;
}

std::vector<unsigned char> welcome_to_wire(const std::vector<Card>& cards) {
  std::vector<unsigned char> out = answer(0, kCardBytes * cards.size());
  for (size_t p = 0; p < cards.size(); ++p) put_card(out.data() + kAnswerHeadBytes + kCardBytes * p, cards[p]);
  return out;
}

std::vector<unsigned char> refusal_to_wire(const std::string& text) {
  const size_t n = std::min(text.size(), kLongestRefusal);
  std::vector<unsigned char> out = answer(1, n);
  std::memcpy(out.data() + kAnswerHeadBytes, text.data(), n);
  return out;
}

std::optional<AnswerHead> answer_head_from_wire(const unsigned char* bytes, int world, std::string& why) {
  const std::uint32_t status = get_u32(bytes + 4);
  if (std::memcmp(bytes, kMagic, 4) != 0 || status > 1) {
    why = "process 0's answer is not a pipewright answer";
    return std::nullopt;
  }
  AnswerHead h;
  h.welcome = status == 0;
  h.length = get_u32(bytes + 8);
  const size_t expected = kCardBytes * static_cast<size_t>(world);
  if (h.welcome && h.length != expected) {
    why = fmt::format("process 0's welcome lists {} bytes of processes, not the {} of {} processes", h.length, expected,
                      world);
    return std::nullopt;
  }
  if (!h.welcome && h.length > kLongestRefusal) {
    why = fmt::format("process 0's refusal announces {} bytes, more than the {} one holds", h.length, kLongestRefusal);
    return std::nullopt;
  }
  return h;
}

std::vector<Card> cards_from_wire(const std::vector<unsigned char>& body, int world) {
  std::vector<Card> cards;
  for (int p = 0; p < world; ++p) cards.push_back(get_card(body.data() + kCardBytes * static_cast<size_t>(p)));
  return cards;
}

}  // namespace pw
