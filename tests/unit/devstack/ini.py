"""iniset/iniget for the devstack stubs: real ini files, like devstack's.

Usage: ini.py set FILE SECTION KEY VALUE | ini.py get FILE SECTION KEY |
ini.py set_multiline FILE SECTION KEY VALUE... (the values one a line:
configparser holds one value per key, devstack repeats the key)
"""

import configparser
import sys


def _load(path):
    parser = configparser.ConfigParser(interpolation=None)
    parser.optionxform = str
    parser.read(path)
    return parser


def main(argv):
    action, path, section, key = argv[:4]
    parser = _load(path)
    if action == 'get':
        print(parser.get(section, key, fallback=''))
        return 0
    if section != 'DEFAULT' and not parser.has_section(section):
        parser.add_section(section)
    parser.set(section, key, '\n'.join(argv[4:]))
    with open(path, 'w') as out:
        parser.write(out)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
