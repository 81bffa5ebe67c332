"""python -m pipewright ARGS...: the command line, in this interpreter."""

import sys

from pipewright import _core


def main() -> int:
    code, out, err = _core.run(sys.argv[1:])
    sys.stdout.write(out)
    sys.stderr.write(err)
    return code


if __name__ == "__main__":
    sys.exit(main())
