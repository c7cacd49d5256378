"""The fleet: status across every environment (reading, findings, cadence, the HTML page) and the CronJob
manifests that run the scheduled jobs. Entered by status and manifests."""
