"""``python -m duetime`` is the ``duetime`` command."""

from duetime.cli import main

if __name__ == "__main__":  # not when a dispatcher process (multiprocessing spawn) imports it
    main()
