"""Issue 12, session 9: the steps' energy error against host gaps, temperature and gap lengths, and the zoo's
temperatures (``simulator.h200_thermal``; reads stored files only).

    python -m scripts.h200_thermal_diagnosis [-o validation/h200/thermal/diagnosis.json]
"""

from simulator.h200_thermal import main

if __name__ == "__main__":
    raise SystemExit(main())
