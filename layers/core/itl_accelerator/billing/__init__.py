"""Billing: turning metered GPU time into what FinOps tools read.

:mod:`itl_accelerator.billing.focus` writes charge lines as a FOCUS 1.2 cost-and-usage file (gzipped CSV) and its
manifest. Which usage records become charge lines, where the file goes and when, is the export's orchestration.
"""
