#include <iostream>

#include "cli/cli.hpp"

int main(int argc, char** argv) { return pw::cli_main(argc, argv, std::cout, std::cerr); }
