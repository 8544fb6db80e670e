"""The fault campaign: a proxy, nemeses, workloads and a checker driving odradek from outside (``python -m chaos``)."""
