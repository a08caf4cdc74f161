"""Writes messages cut at awkward places: several per write, split across writes, a UTF-8 character cut in
two, CRLF endings, a byte at a time. It writes the next piece each time a line arrives on stdin, then exits 0.
"""

import sys

PIECES = [
    b'{"jsonrpc":"2.0","method":"a"}\n{"jsonrpc":"2.0","me',
    b'thod":"b"}\r\n\n{"jsonrpc":"2.0","id":1,"result":{"text":"caf\xc3',
    b'\xa9"}}\n{"jsonrpc":"2.0","method":"c"}\n{"jsonrpc":"2.0","method":"d"}\n',
    b'{"jsonrpc":"2.0","id":"two","result":{}}\n',
]


def main() -> None:
    out = sys.stdout.buffer
    for index, piece in enumerate(PIECES):
        if index:
            sys.stdin.buffer.readline()
        if index == len(PIECES) - 1:
            for i in range(len(piece)):
                out.write(piece[i : i + 1])
                out.flush()
        else:
            out.write(piece)
            out.flush()


main()
