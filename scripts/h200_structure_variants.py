"""The H200 model's structure variants refitted on the zoo and compared by its held-out split (issue 12, session 8): ``simulator.h200_variants``.

    python -m scripts.h200_structure_variants [options]   (the name the files under validation/h200/small_kernels/ were written with)
"""

from simulator.h200_variants import main

if __name__ == "__main__":
    raise SystemExit(main())
