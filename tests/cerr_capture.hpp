#pragma once
// Everything written to std::cerr while a CerrCapture lives, for tests that check a warning's exact text.
#include <iostream>
#include <sstream>
#include <string>

namespace pw::test {

class CerrCapture {
 public:
  CerrCapture() : old_(std::cerr.rdbuf(text_.rdbuf())) {}
  ~CerrCapture() { std::cerr.rdbuf(old_); }
  CerrCapture(const CerrCapture&) = delete;
  CerrCapture& operator=(const CerrCapture&) = delete;
  std::string text() const { return text_.str(); }

 private:
  std::stringstream text_;
  std::streambuf* old_;
};

}  // namespace pw::test
