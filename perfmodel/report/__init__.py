"""perfmodel report: figures (PNG) and one self-contained HTML page of profiles, predictors and a plan.

Importing this package imports matplotlib (Agg backend); `import perfmodel` alone never does.
"""

from perfmodel.report.build import Report, make_report, make_sections

__all__ = ["Report", "make_report", "make_sections"]
