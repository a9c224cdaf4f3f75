"""lancetnic_flow: train text models on more text than fits in memory."""
__version__ = "0.1.0"
