"""The accounting Spark job's stages (see drkit/accounting/job.py, the entry point).

Self-contained: these modules import pyspark and the standard library only, never the rest of
drkit, because the job also runs under ``spark-submit`` on a cluster where drkit is not
installed.  ``drkit verify --write-spec`` ships them with ``--py-files`` (a zip holding this
package and its two parent ``__init__`` files; drkit.accounting.session.job_archive).
"""
