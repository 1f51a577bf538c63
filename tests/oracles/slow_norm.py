"""Like torchlet_norm, but each run takes a while: lets a test kill the controller mid-probe."""
import sys
import time

import torchlet

time.sleep(1.5)
sys.exit(0 if abs(torchlet.norm([3.0, 4.0]) - 5.0) < 1e-9 else 1)
