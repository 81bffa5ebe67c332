#pragma once
// SHA-256 (FIPS 180-4) of a byte string: the TCP group's job token is a digest of the job's id, so that the
// hello has a fixed size and carries no launcher variable in the clear.
#include <array>
#include <string_view>

namespace pw {

using Sha256 = std::array<unsigned char, 32>;

Sha256 sha256(std::string_view bytes);

}  // namespace pw
