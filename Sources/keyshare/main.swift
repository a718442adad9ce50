print("keyshare")
