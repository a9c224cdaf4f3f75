import sys

if __name__ == "__main__":
    try:
        from .cli import main
    except KeyboardInterrupt:   # Ctrl-C while the command line tool is still loading: no traceback
        sys.exit(130)
    sys.exit(main())
