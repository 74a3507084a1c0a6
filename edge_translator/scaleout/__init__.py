"""Past one machine: a sentence corpus (``corpus``) or a document archive (``docs --ray``) as one
resumable job, locally or on a Ray cluster (Ray Data, behind the extra ``ray``).

Nothing here imports Ray until a job is sent to a cluster; the local corpus job needs only the
core (and pyarrow for Parquet).
"""
