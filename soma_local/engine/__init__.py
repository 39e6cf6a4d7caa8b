"""Engine layer: monitors, the controller, the pause schedule, a reasoning session, the supervise loop, traces."""
