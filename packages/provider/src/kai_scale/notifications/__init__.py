"""Notifiers: the pipeline's alerts sent through the SMTP and HTTP providers' notifiers."""
