import Media
import ServiceKit

extension MediaConfig {
    /// Only the executable reads the config file: the domain never sees it.
    /// The `media` section of the deployment config over the defaults.
    init(resolved: ResolvedOptions) {
        self.init()
        let section = resolved.config.media
        if let v = section?.maxPhotoBytes { maxPhotoBytes = v }
        if let v = section?.quotaBytes { quotaBytes = v }
        if let v = section?.uploadsPerHour { uploadsPerHour = v }
    }
}
