"""stub"""

def write_report(frame, charts, outdir):
    raise NotImplementedError
